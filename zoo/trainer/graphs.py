"""CUDA graphs of the training epoch: after a few eager epochs, each epoch is replayed, not launched op by op.

An epoch of :func:`zoo.trainer.loop.train_replicas` is two device programs with the host between
them: *assess* (evaluate state ``e`` — forward, the training loss's gradients, the metrics — then
the divergence / selection / stopping bookkeeping and the kept best parameters) and *advance* (the
lr scheduler's step and one optimisation epoch: the stacked optimiser's update of every parameter
and its state).  Between them the loop calls the callbacks and, every ``check_every`` epochs,
reads the stop flags.  On CUDA each half is captured once (``torch.cuda.CUDAGraph``, sharing one
memory pool: they are replayed in the order captured) after :data:`WARMUP` eager epochs on the
capture's side stream — so that lazy set-up (cuBLAS handles, the compiled ops' per-graph
metadata, the optimiser's state in its final layout) happens before the capture, as PyTorch's
CUDA-graph notes ask — and replayed at every later epoch but the last, which is run eagerly (it
decides the max-epochs stop on the host).  A replay is one launch for thousands of kernels: the
host cost of an epoch no longer grows with the depth of the model.

What makes the replay the eager epoch (the static-buffer contract; a CPU double of the capture
checks it op by op in the tests):

* every tensor an epoch carries to the next is updated in place, never rebound: the parameters,
  the optimiser's state (its per-replica step counts are a device tensor, so Adam's bias
  correction and the warm-up factor are computed on the device), the scheduler's state, the
  :class:`~zoo.trainer.state.LoopState` (:func:`zoo.trainer.stopping.put`) and a graph task's
  pass loss;
* the epoch the bookkeeping records is read from a device tensor (:attr:`EpochGraphs.clock`) that
  the captured *advance* increments; no per-epoch host value enters a captured op;
* *assess*'s outputs (metrics, losses, gradients) are static: the same tensors after every replay,
  read by *advance* and by the callbacks (a callback that keeps them across epochs copies them);
* dropout and attention dropout draw from each replica's own CUDA generator
  (:class:`zoo.ops.dropout.ReplicaRandomness`), registered with both graphs: each replay advances
  a generator's Philox offset by what the captured epoch drew, as the eager epoch does, so the
  masks are the eager ones and a mid-run checkpoint saves the right generator states.

Captured: transductive tasks scored by plain accuracy, and graph tasks whose batches are static
(``batch_size = 0``: each split one batch, cached on the device).  Eager: mini-batches
(``batch_size > 0``, collated on the host in a new order every epoch) and metrics computed on the
host (``task.evaluate``, e.g. ROC-AUC).

``TrainConfig.cuda_graphs``: ``"auto"`` (default) captures on a CUDA device where the run allows
it — else it trains eagerly, saying why once — and a capture that fails (an op that reads the
device on the host, a kernel that cannot be captured) falls back to eager training with one
warning naming the error; ``"on"`` makes both of those an error, and is an error on a device
without CUDA graphs; ``"off"`` never captures.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, ContextManager, Iterator, List, Optional, Protocol, Sequence, Tuple, TypeVar

import torch
from torch import Tensor

from zoo.trainer.config import TrainConfig
from zoo.trainer.stopping import Evaluation
from zoo.trainer.views import GraphListView, TransductiveView, plain_accuracy

#: eager epochs before the capture (run on the capture's stream, as PyTorch's CUDA-graph notes ask)
WARMUP = 3

T = TypeVar("T")


class Capture(Protocol):
    """One captured program: ``capture(fn)`` records ``fn``'s device work *without running it* and
    returns its outputs — static buffers, which hold the values of the latest ``replay()``."""

    def capture(self, fn: Callable[[], T]) -> T: ...

    def replay(self) -> None: ...


class Backend(Protocol):
    """Where captures happen: ``warmup()`` wraps an eager epoch before the capture, ``new_capture``
    makes a capture that draws from ``generators`` (registered with it)."""

    def warmup(self) -> ContextManager[None]: ...

    def new_capture(self, generators: Sequence[torch.Generator]) -> Capture: ...


class CudaCapture:
    """A ``torch.cuda.CUDAGraph`` captured on ``stream`` into ``pool``."""

    def __init__(self, stream: Any, pool: Any, generators: Sequence[torch.Generator]) -> None:
        self.stream, self.pool, self.generators = stream, pool, list(generators)
        self.graph = torch.cuda.CUDAGraph()

    def capture(self, fn: Callable[[], T]) -> T:
        register = getattr(self.graph, "register_generator_state", None)
        if register is not None:  # torch before lazy registration: a user generator joins the graph explicitly
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated (a no-op) where registration is implicit
                for gen in self.generators:
                    if gen.device.type == "cuda":
                        register(gen)
        with torch.cuda.graph(self.graph, pool=self.pool, stream=self.stream):
            return fn()

    def replay(self) -> None:
        self.graph.replay()


class CudaBackend:
    """CUDA graphs on ``device``: one side stream for the warm-up and the captures, one memory pool."""

    def __init__(self, device: torch.device) -> None:
        self.stream = torch.cuda.Stream(device)
        self.pool = torch.cuda.graph_pool_handle()

    @contextlib.contextmanager
    def warmup(self) -> Iterator[None]:
        current = torch.cuda.current_stream(self.stream.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            yield
        current.wait_stream(self.stream)

    def new_capture(self, generators: Sequence[torch.Generator]) -> Capture:
        return CudaCapture(self.stream, self.pool, generators)


def capture_backend(device: torch.device) -> Optional[Backend]:
    """How ``device`` captures an epoch: CUDA graphs on ``cuda``; ``None`` elsewhere."""
    return CudaBackend(device) if device.type == "cuda" else None


def capture_blocker(task: Any, view: Any) -> Optional[str]:
    """Why this run's epoch cannot be captured (its shapes or host work change per epoch), or ``None``."""
    if not plain_accuracy(task):
        return f"the task's metric ({task.metric}) is computed on the host every epoch"
    if isinstance(view, TransductiveView):
        return None
    if isinstance(view, GraphListView):
        if view.batch_size:
            return (f"mini-batches (batch_size = {view.batch_size}) are collated on the host every epoch; "
                    "batch_size = 0 (one batch per split) is captured")
        if view.cache is None:
            return "the graphs are too large to keep on the device, so they are copied there every epoch"
        return None
    return f"no capture for a {type(view).__name__}"


class EpochGraphs:
    """Runs the loop's two epoch halves: eagerly, or (given a backend) captured at epoch ``first``
    and replayed up to the last epoch ``last`` (never captured); see the module docstring.

    ``assess(fn, epoch)`` runs ``fn(epoch, stamp) -> Evaluation`` (``stamp``: the epoch as a device
    tensor when captured, else ``None``); ``advance(fn, epoch, ev)`` runs ``fn(epoch, ev)``.
    """

    def __init__(self, backend: Optional[Backend] = None, mode: str = "off",
                 generators: Callable[[], List[torch.Generator]] = list, device: Any = None,
                 first: int = 0, last: int = 0) -> None:
        self.backend, self.mode, self.generators = backend, mode, generators
        self.first, self.last = first, last
        #: the epoch being run, on the device (captured halves read and advance it)
        self.clock = torch.zeros((), dtype=torch.long, device=device)
        self.failed: Optional[str] = None
        self._assess: Optional[Capture] = None
        self._advance: Optional[Capture] = None
        self._ev: Optional[Evaluation] = None

    @property
    def replays(self) -> bool:
        """Whether epochs may be replayed (the optimiser must then never read its mask on the host)."""
        return self.backend is not None and self.failed is None

    def _captured(self, epoch: int) -> bool:
        return self.replays and self.first <= epoch < self.last

    def _eager(self, epoch: int) -> ContextManager[None]:
        if self.replays and epoch < self.first:
            return self.backend.warmup()  # type: ignore[union-attr]
        return contextlib.nullcontext()

    def assess(self, fn: Callable[[int, Optional[Tensor]], Evaluation], epoch: int) -> Evaluation:
        if not self._captured(epoch):
            with self._eager(epoch):
                return fn(epoch, None)
        if self._assess is None:
            self.clock.fill_(epoch)
            captured = self._capture(lambda: fn(epoch, self.clock))
            if captured is None:
                return fn(epoch, None)
            self._assess, self._ev = captured
        self._assess.replay()
        assert self._ev is not None
        return self._ev

    def advance(self, fn: Callable[[int, Evaluation], None], epoch: int, ev: Evaluation) -> None:
        if not self._captured(epoch) or self._assess is None:
            with self._eager(epoch):
                fn(epoch, ev)
            return
        if self._advance is None:
            def step() -> None:
                fn(epoch, ev)
                self.clock.add_(1)

            captured = self._capture(step)
            if captured is None:
                fn(epoch, ev)
                return
            self._advance = captured[0]
        self._advance.replay()

    def _capture(self, fn: Callable[[], T]) -> Optional[Tuple[Capture, T]]:
        assert self.backend is not None
        capture = self.backend.new_capture(self.generators())
        try:
            return capture, capture.capture(fn)
        except Exception as e:  # eager from here on ("auto"), or the error ("on")
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            reason = type(e).__name__ + (f": {first}" if first else "")
            if self.mode == "on":
                raise RuntimeError(f"cuda_graphs = 'on': the training epoch could not be captured ({reason}); "
                                   "set cuda_graphs = 'auto' to fall back to eager training") from e
            self.failed = reason
            self._assess = self._advance = None
            warnings.warn(f"cuda_graphs: the training epoch could not be captured as a CUDA graph ({reason}); "
                          "training eagerly", RuntimeWarning, stacklevel=2)
            return None


def epoch_graphs(cfg: TrainConfig, device: torch.device, task: Any, view: Any, replicas: Any,
                 first_epoch: int) -> EpochGraphs:
    """The runner of a run's epochs under ``cfg.cuda_graphs`` (eager where nothing is captured);
    a run that resumes at ``first_epoch`` warms up from there."""
    mode = cfg.cuda_graphs
    backend = capture_backend(device) if mode != "off" else None
    if backend is None:
        if mode == "on":
            raise ValueError(f"cuda_graphs = 'on' needs a CUDA device, got {device}; use 'auto' (CUDA graphs where "
                             "the device has them) or 'off'")
        return EpochGraphs()
    reason = capture_blocker(task, view)
    if reason is not None:
        if mode == "on":
            raise ValueError(f"cuda_graphs = 'on' cannot capture this run: {reason}; use 'auto' (eager here) or 'off'")
        warnings.warn(f"cuda_graphs: training eagerly, since {reason}", RuntimeWarning, stacklevel=2)
        return EpochGraphs()
    return EpochGraphs(backend, mode, replicas.rng.generators, device, first_epoch + WARMUP, cfg.epochs)
