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
  read by *advance*; the callbacks get copies of the metrics and losses (as eager epochs make new
  ones), and the gradients themselves — the buffers the next step reads, so that a callback's
  in-place transform reaches it (:class:`zoo.rescale.DynamicRescaling`); one that keeps gradients
  across epochs copies them;
* dropout and attention dropout draw from each replica's own CUDA generator
  (:class:`zoo.ops.dropout.ReplicaRandomness`), registered with both graphs: each replay advances
  a generator's Philox offset by what the captured epoch drew, as the eager epoch does, so the
  masks are the eager ones and a mid-run checkpoint saves the right generator states.

Captured: transductive tasks scored by plain accuracy, and graph tasks whose batches are static
(``batch_size = 0``: each split one batch, cached on the device).  Eager: mini-batches
(``batch_size > 0``, collated on the host in a new order every epoch) and metrics computed on the
host (``task.evaluate``, e.g. ROC-AUC).

A group proves its graphs before using them (the *self-check*, :mod:`zoo.trainer.graph_check`):
right after the capture, the loop's state is kept, one epoch is run eagerly, the state is put back,
the same epoch is replayed, and the parameters, the optimiser's and the loop's state and the metrics
of the two are compared within :func:`~zoo.trainer.graph_check.tolerance`; then the state is put
back once more and the replays begin.  So no replayed number is used before one replay has been
seen to equal the eager epoch (a kernel launched off the capture stream, a host value frozen at the
capture, an input freed after it would each show there).  The check runs once per group: what it
cannot see is a replay that goes wrong only later (the CPU double of the tests checks every replay).

``TrainConfig.cuda_graphs``: ``"auto"`` (default) captures on a CUDA device where the run allows
it — else it trains eagerly, saying why once.  A capture that raises, a replay that raises or a
self-check that finds a difference raises :class:`GraphFallback`: the group must be run again
eagerly from its start, never continued here — a failed capture may leave this process's random
generators in capture mode (torch before the per-capture generator state: the next eager dropout
draw then raises) and its allocator's graph pool inconsistent.  ``zoo bench`` runs it again in a
fresh worker process (:mod:`zoo.bench.run.executors`) and its records say ``cuda_graphs: fell back
(reason)``; ``zoo.fit`` runs it again here only after a self-check difference (nothing raised on the
device) and otherwise asks for a fresh process.  ``"on"`` makes each of these an error, and is an
error on a device without CUDA graphs; ``"off"`` never captures.  Every run states how it ran
(:attr:`EpochGraphs.status`, the records' ``cuda_graphs``): ``replayed``, ``eager`` (with the reason
where ``auto`` declined on a CUDA device) or, set by the runner, ``fell back (reason)``.

Random streams: a replica's own CUDA generator is graph-safe only where torch lets a graph register
it (``CUDAGraph.register_generator_state``, torch 2.4 on; later torch registers generators lazily
and keeps their capture state per capture).  On a torch without it only the default generator can
be captured, so a run that draws dropout masks from the replicas' streams trains eagerly
(:func:`rng_support`).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, ContextManager, Iterator, List, Optional, Protocol, Sequence, Tuple, TypeVar

import torch
from torch import Tensor

from zoo.trainer.config import TrainConfig
from zoo.trainer.graph_check import Holders, Snapshot, first_difference, observe, tolerance
from zoo.trainer.replicas import draws_dropout
from zoo.trainer.stopping import Evaluation
from zoo.trainer.views import GraphListView, TransductiveView, plain_accuracy

#: eager epochs before the capture (run on the capture's stream, as PyTorch's CUDA-graph notes ask)
WARMUP = 3
#: how a torch's CUDA graphs treat a replica's own generator (:func:`rng_support`)
PER_CAPTURE = "per-capture"
PER_GENERATOR = "per-generator"
DEFAULT_ONLY = "default generator only"

T = TypeVar("T")


class GraphFallback(RuntimeError):
    """The captured epoch cannot be trusted (see the module docstring): ``reason`` says why;
    ``poisoned``: a capture or a replay raised, so this process's CUDA state is suspect and the
    eager run must happen in a fresh process."""

    def __init__(self, reason: str, poisoned: bool) -> None:
        where = " in a fresh process" if poisoned else ""
        super().__init__(f"cuda_graphs: {reason}; the group must be run again eagerly from its start{where}")
        self.reason, self.poisoned = reason, poisoned


class Capture(Protocol):
    """One captured program: ``capture(fn)`` records ``fn``'s device work *without running it* and
    returns its outputs — static buffers, which hold the values of the latest ``replay()``."""

    def capture(self, fn: Callable[[], T]) -> T: ...

    def replay(self) -> None: ...


class Backend(Protocol):
    """Where captures happen: ``warmup()`` wraps an eager epoch before the capture, ``new_capture``
    makes a capture that draws from ``generators`` (registered with it); ``rng`` says how its
    captures treat a replica's own generator (:func:`rng_support`)."""

    rng: str

    def warmup(self) -> ContextManager[None]: ...

    def new_capture(self, generators: Sequence[torch.Generator]) -> Capture: ...


def rng_support(graph_cls: Any = None, device: Optional[torch.device] = None) -> str:
    """How this torch's CUDA graphs treat a replica's own generator: :data:`DEFAULT_ONLY` where the
    graph class cannot register generators (torch before 2.4, and every CPU build), else
    :data:`PER_GENERATOR` (registered, with one capture state per generator), or — probed on
    ``device``: a graph object is made and the default generator registered with it, nothing is
    captured — :data:`PER_CAPTURE` where registering says it is deprecated (torch that registers
    generators lazily keeps their capture state per capture)."""
    cls = torch.cuda.CUDAGraph if graph_cls is None else graph_cls
    if not callable(getattr(cls, "register_generator_state", None)):
        return DEFAULT_ONLY
    if device is None:
        return PER_GENERATOR
    graph = cls()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph.register_generator_state(torch.cuda.default_generators[device.index or 0])
    return PER_CAPTURE if any("deprecat" in str(w.message).lower() for w in caught) else PER_GENERATOR


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
        self.rng = rng_support(device=self.stream.device)

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


def random_blocker(backend: Backend, model: Any) -> Optional[str]:
    """Why ``model``'s dropout draws cannot be captured by ``backend``, or ``None``."""
    if backend.rng == DEFAULT_ONLY and draws_dropout(model):
        return (f"this torch ({torch.__version__}) captures only the default random generator (its CUDAGraph has no "
                "register_generator_state), not the replicas' own dropout streams; torch >= 2.4 captures them")
    return None


def _reason(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return type(e).__name__ + (f": {first}" if first else "")


class EpochGraphs:
    """Runs the loop's two epoch halves: eagerly, or (given a backend) captured and self-checked at
    epoch ``first`` and replayed up to the last epoch ``last`` (never captured); see the module
    docstring.  :meth:`bind` gives it the halves — ``assess(epoch, stamp) -> Evaluation`` (``stamp``:
    the epoch as a device tensor when captured, else ``None``) and ``advance(epoch, ev)`` — and what
    the self-check keeps and compares.  ``status``: how the run went (the records' ``cuda_graphs``).
    """

    def __init__(self, backend: Optional[Backend] = None, mode: str = "off",
                 generators: Callable[[], List[torch.Generator]] = list, device: Any = None,
                 first: int = 0, last: int = 0, tol: float = 0.0, status: str = "eager") -> None:
        self.backend, self.mode, self.generators = backend, mode, generators
        self.first, self.last, self.tol, self.status = first, last, tol, status
        #: the epoch being run, on the device (captured halves read and advance it)
        self.clock = torch.zeros((), dtype=torch.long, device=device)
        self._halves: Any = (None, None)
        self._holders: Holders = dict
        self._rng: Any = None
        self._programs: Optional[Tuple[Capture, Capture]] = None
        self._ev: Optional[Evaluation] = None

    def bind(self, assess: Callable[[int, Optional[Tensor]], Evaluation], advance: Callable[[int, Evaluation], None],
             holders: Holders = dict, rng: Any = None) -> None:
        """The loop's halves; ``holders()``: what the loop carries between epochs, by name (read at
        each snapshot: an object may be replaced during the warm-up); ``rng``: the replicas' streams."""
        self._halves, self._holders, self._rng = (assess, advance), holders, rng

    @property
    def replays(self) -> bool:
        """Whether epochs may be replayed (the optimiser must then never read its mask on the host)."""
        return self.backend is not None

    def _captured(self, epoch: int) -> bool:
        return self.replays and self.first <= epoch < self.last

    def _eager(self, epoch: int) -> ContextManager[None]:
        if self.replays and epoch < self.first:
            return self.backend.warmup()  # type: ignore[union-attr]
        return contextlib.nullcontext()

    def assess(self, epoch: int) -> Evaluation:
        if not self._captured(epoch):
            with self._eager(epoch):
                return self._halves[0](epoch, None)
        if self._programs is None:
            self._programs = self._capture_and_check(epoch)
        self._replay(self._programs[0], epoch)
        assert self._ev is not None
        return self._ev

    def advance(self, epoch: int, ev: Evaluation) -> None:
        if self._programs is None or not self._captured(epoch):
            with self._eager(epoch):
                self._halves[1](epoch, ev)
            return
        self._replay(self._programs[1], epoch)

    def for_callbacks(self, ev: Evaluation) -> Evaluation:
        """``ev`` as the callbacks see it: a replayed epoch's metrics and losses copied out of the static
        buffers (the next replay overwrites those), its gradients as they are (the next step reads them)."""
        if self._programs is None or ev is not self._ev:
            return ev
        return Evaluation(ev.scores.clone(), ev.train_loss.clone(), ev.val_loss.clone(), ev.grads)

    def _capture_and_check(self, epoch: int) -> Tuple[Capture, Capture]:
        """Capture both halves at ``epoch``, then the self-check; the loop's state is as it was."""
        assess_fn, advance_fn = self._halves
        before = Snapshot(self._holders(), self._rng)
        self.clock.fill_(epoch)
        assess, ev = self._capture(lambda: assess_fn(epoch, self.clock))

        def step() -> None:
            advance_fn(epoch, ev)
            self.clock.add_(1)

        advance, _ = self._capture(step)
        self._ev = ev
        eager_ev = assess_fn(epoch, None)
        advance_fn(epoch, eager_ev)
        eager = observe(eager_ev, self._holders())
        before.restore()
        self.clock.fill_(epoch)
        self._replay(assess, epoch)
        self._replay(advance, epoch)
        difference = first_difference(eager, observe(ev, self._holders()), self.tol)
        before.restore()
        self.clock.fill_(epoch)
        if difference is not None:
            self._fail(f"the self-check at epoch {epoch} found the replayed epoch differing from the eager one: "
                       f"{difference}", poisoned=False)
        self.status = "replayed"
        return assess, advance

    def _capture(self, fn: Callable[[], T]) -> Tuple[Capture, T]:
        assert self.backend is not None
        capture = self.backend.new_capture(self.generators())
        try:
            return capture, capture.capture(fn)
        except Exception as e:
            if self.mode == "on":
                raise RuntimeError(f"cuda_graphs = 'on': the training epoch could not be captured ({_reason(e)}); "
                                   "use cuda_graphs = 'auto' (eager where the capture fails) or 'off'") from e
            raise GraphFallback(f"the training epoch could not be captured ({_reason(e)})", poisoned=True) from e

    def _replay(self, program: Capture, epoch: int) -> None:
        try:
            program.replay()
        except Exception as e:
            self._fail(f"the replay of epoch {epoch} raised {_reason(e)}", poisoned=True, cause=e)

    def _fail(self, reason: str, poisoned: bool, cause: Optional[BaseException] = None) -> None:
        if self.mode == "on":
            raise RuntimeError(f"cuda_graphs = 'on': {reason}; use cuda_graphs = 'auto' (eager where the graphs "
                               "fail) or 'off'") from cause
        raise GraphFallback(reason, poisoned) from cause


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
    reason = capture_blocker(task, view) or random_blocker(backend, replicas.base)
    if reason is not None:
        if mode == "on":
            raise ValueError(f"cuda_graphs = 'on' cannot capture this run: {reason}; use 'auto' (eager here) or 'off'")
        warnings.warn(f"cuda_graphs: training eagerly, since {reason}", RuntimeWarning, stacklevel=2)
        return EpochGraphs(status=f"eager ({reason})")
    return EpochGraphs(backend, mode, replicas.rng.generators, device, first_epoch + WARMUP, cfg.epochs,
                       tolerance(replicas.params[0].dtype, cfg.precision))
