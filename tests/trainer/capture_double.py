"""A CPU stand-in for a CUDA graph capture that checks, op by op, the contract a replayed epoch relies on.

A CUDA graph freezes at capture the kernels, their non-tensor arguments and the address of every
tensor they read or write that outlives the capture; a replay runs exactly that again.  An epoch
that rebinds a state tensor (``state.best = new``), passes a per-epoch Python number into an op,
changes a shape or branches on the host would be captured fine and then replay wrongly.  The
double (:class:`CheckedBackend`, :class:`CheckedCapture`) makes those failures loud on the CPU:

* ``capture(fn)`` runs ``fn`` under a recording dispatch mode, then undoes what it did (every
  tensor that existed before and was written is restored, every generator rewound): like a real
  capture, it runs nothing.  The outputs it returns are the static buffers; the floating-point
  ones it made are set to NaN until the first replay (a real capture leaves them unwritten).
* ``replay()`` runs ``fn`` again under the recorder and requires the same trace: the same ops with
  the same non-tensor arguments, the same addresses, offsets, shapes, strides and dtypes of the
  tensors that existed before the run, the same shapes of the temporaries; then it copies ``fn``'s
  outputs into the static buffers.
* A host read (``item``, ``bool()``, ``nonzero``, ``tolist``...) inside ``fn`` raises, as it
  makes a CUDA capture fail.
* Liveness: every tensor the capture read that existed before it must still exist at each replay
  (a CUDA graph reads its address; a freed one may hold anything by then).
* Host values: a 0-dim tensor the capture read (a CPU scalar in a CUDA run is passed to the kernel
  by value, frozen at the capture) may change between replays only by a captured program's write;
  and a tensor made from host data inside ``fn`` (``torch.tensor(x)``, ``as_tensor``: a copy from a
  host buffer) must hold the captured value at every replay.

Failures to inject (the fallback's tests): ``CheckedBackend(fail=...)`` makes each capture raise;
``fail_replay=(n, error)`` makes the ``n``-th replay of a capture raise; ``uncaptured="aten.where.self_out"``
leaves every op whose name contains it out of the graph (recorded, never run on a replay), as a
kernel launched off the capture stream would be; ``rng=DEFAULT_ONLY`` is a torch whose graphs
capture only the default generator.

Used by monkeypatching :func:`zoo.trainer.graphs.capture_backend` to return a
:class:`CheckedBackend` on the CPU.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from tests.trainer.host_sync import HostSyncCounter
from zoo.trainer.graphs import PER_CAPTURE


class ContractError(AssertionError):
    """A replay would not do what the captured epoch did."""


def leaves(obj: Any) -> List[torch.Tensor]:
    """The tensors of ``obj`` (tensors, lists, tuples, dicts, dataclasses), in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in leaves(getattr(obj, f.name))]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in leaves(v)]
    if isinstance(obj, dict):
        return [t for k in sorted(obj) for t in leaves(obj[k])]
    return []


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage (sparse, ...)
        return 0


def _is_host_data(func: Any) -> bool:
    """``torch.tensor`` / ``as_tensor`` inside a dispatch mode: the host buffer is lifted into a tensor."""
    return str(func).startswith("aten.lift_fresh")


class _Recorder(TorchDispatchMode):
    """Records every op as ``(op, arguments)``: a tensor made during the run is described by its
    layout, one that existed before by its address too; keeps the tensors that existed before
    (``inputs``, by storage), the 0-dim ones' values (``scalars``), the storages written
    (``written``), the values lifted from host data (``host``); with ``undo``, keeps a copy of every
    pre-existing storage before its first write."""

    def __init__(self, undo: bool, uncaptured: Optional[str] = None) -> None:
        super().__init__()
        self.undo, self.uncaptured = undo, uncaptured
        self.trace: List[Tuple[Any, ...]] = []
        self.made: Set[int] = set()
        self.saved: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}
        self.written: Set[int] = set()
        self.inputs: Dict[int, Tuple[int, str, torch.Tensor]] = {}
        self.scalars: Dict[int, Tuple[int, str, torch.Tensor, torch.Tensor]] = {}
        self.host: List[Tuple[int, torch.Tensor]] = []

    def _describe(self, a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            ptr = _storage(a)
            layout = (tuple(a.shape), a.stride() if a.layout == torch.strided else None, a.dtype,
                      a.storage_offset() if a.layout == torch.strided else None)
            return ("new", *layout) if ptr == 0 or ptr in self.made else ("old", ptr, *layout)
        if isinstance(a, torch.Generator):  # a new Python object each call: named by its stream
            return ("generator", str(a.device), a.initial_seed())
        if isinstance(a, float):
            return ("float", a.hex()) if a == a else ("float", "nan")
        return a if isinstance(a, (int, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                                   torch.memory_format)) else repr(a)

    def _writes(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in leaves(value):
                ptr = _storage(t)
                if ptr and ptr not in self.made:
                    self.written.add(ptr)
                    if self.undo and ptr not in self.saved:  # the whole storage, as bytes
                        whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                        self.saved[ptr] = (whole, whole.clone())

    def _keep_inputs(self, func: Any, flat: List[Any]) -> None:
        for t in flat:
            ptr = _storage(t) if isinstance(t, torch.Tensor) else 0
            if ptr and ptr not in self.made and ptr not in self.inputs:
                self.inputs[ptr] = (len(self.trace), str(func), t)
                if t.dim() == 0 and ptr not in self.written:  # its value as the capture read it
                    self.scalars[ptr] = (len(self.trace), str(func), t, t.detach().clone())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if _is_host_data(func):
            self.host.append((len(self.trace), flat[0].detach().clone()))
            self.made.add(_storage(flat[0]))  # a new tensor of the run (the lifted buffer is its storage)
            entry = (str(func), tuple(("host", tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a
                                      for a in flat))
        else:
            entry = (str(func), tuple(self._describe(a) for a in flat))
            self._keep_inputs(func, flat)
        self._writes(func, args, kwargs)
        inputs = {_storage(t) for t in flat if isinstance(t, torch.Tensor)}
        if self.uncaptured is not None and self.uncaptured in str(func):
            out = _left_out(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
        outs, _ = tree_flatten(out)
        for t in outs:
            if isinstance(t, torch.Tensor) and _storage(t) not in inputs:
                self.made.add(_storage(t))
        self.trace.append(entry + (tuple(self._describe(t) for t in outs),))
        return out


def _left_out(func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """An op left out of the graph: its output tensor, unwritten (in-place and ``out=`` ops only)."""
    if "out" in kwargs:
        return kwargs["out"]
    if str(func).split(".")[1].endswith("_"):
        return args[0]
    raise ValueError(f"the double leaves out only in-place or out= ops, not {func}")


def _run(fn: Callable[[], Any], recorder: _Recorder) -> Any:
    """``fn()`` under ``recorder``; a host read in it raises :class:`ContractError`."""
    syncs = HostSyncCounter()
    with syncs, recorder:
        out = fn()
    if syncs.counts:
        raise ContractError(f"a captured epoch reads the device on the host:\n{syncs.report()}")
    return out


class CheckedCapture:
    """A capture on the CPU that checks the static-buffer contract (see the module docstring);
    ``written``: the storages every capture of its backend writes (shared)."""

    def __init__(self, generators: Sequence[torch.Generator], written: Optional[Set[int]] = None,
                 uncaptured: Optional[str] = None, fail_replay: Optional[Tuple[int, Exception]] = None) -> None:
        self.generators = list(generators)
        self.written = set() if written is None else written
        self.uncaptured, self.fail_replay = uncaptured, fail_replay
        self.replays = 0

    def capture(self, fn: Callable[[], Any]) -> Any:
        rng = [g.get_state() for g in self.generators], torch.get_rng_state()
        rec = _Recorder(undo=True, uncaptured=self.uncaptured)
        try:
            out = _run(fn, rec)
        finally:  # a capture runs nothing: undo every write and draw
            with torch.no_grad():
                for whole, copy in rec.saved.values():
                    whole.copy_(copy)
            for g, state in zip(self.generators, rng[0]):
                g.set_state(state)
            torch.set_rng_state(rng[1])
        self.fn, self.trace, self.outputs, self.host = fn, rec.trace, out, rec.host
        self.alive = [(at, op, StorageWeakRef(t.untyped_storage())) for at, op, t in rec.inputs.values()]
        self.scalars = list(rec.scalars.items())
        self.written |= rec.written
        self._static = [t.detach() for t in leaves(out)]
        with torch.no_grad():  # outputs the capture made (not state tensors it returns as they are)
            for t in self._static:
                if t.is_floating_point() and _storage(t) in rec.made:
                    t.fill_(float("nan"))
        return out

    def _check_inputs(self) -> None:
        """What a CUDA graph reads but the re-run below would not: freed inputs, host scalars changed."""
        n = self.replays + 1
        for at, op, ref in self.alive:
            if ref.expired():
                raise ContractError(f"replay {n}: an input of op {at} ({op}) was freed after the capture; a CUDA "
                                    "graph would read its old address")
        for ptr, (at, op, t, value) in self.scalars:
            if ptr not in self.written and not torch.equal(t, value):
                raise ContractError(f"replay {n}: the 0-dim tensor read by op {at} ({op}) changed outside the captured "
                                    f"programs ({value.item()} at the capture, {t.item()} now); a CUDA graph replays "
                                    "a host scalar's value from the capture")

    def replay(self) -> None:
        if self.fail_replay is not None and self.fail_replay[0] == self.replays + 1:
            raise self.fail_replay[1]
        self._check_inputs()
        rec = _Recorder(undo=False, uncaptured=self.uncaptured)
        out = _run(self.fn, rec)
        if rec.trace != self.trace:
            at = next(i for i, (a, b) in enumerate(zip(rec.trace + [None], self.trace + [None])) if a != b)
            raise ContractError(f"replay {self.replays + 1} differs from the capture at op {at} of "
                                f"{len(self.trace)}:\n  captured: {self.trace[at] if at < len(self.trace) else None}"
                                f"\n  replayed: {rec.trace[at] if at < len(rec.trace) else None}")
        for (at, captured), (_, now) in zip(self.host, rec.host):
            if not torch.equal(captured, now):
                raise ContractError(f"replay {self.replays + 1}: op {at} makes a tensor from host data whose value "
                                    "differs from the capture's; a CUDA graph copies the captured host buffer again")
        new = [t.detach() for t in leaves(out)]
        if [(t.shape, t.dtype) for t in new] != [(t.shape, t.dtype) for t in self._static]:
            raise ContractError("the replayed outputs differ in number, shape or dtype from the captured ones")
        with torch.no_grad():
            for static, value in zip(self._static, new):
                static.copy_(value)
        self.replays += 1


class CheckedBackend:
    """:class:`zoo.trainer.graphs.Backend` for the CPU tests: every capture a :class:`CheckedCapture`
    (kept in ``captures``); the failures to inject are described in the module docstring."""

    def __init__(self, fail: Optional[Exception] = None, fail_replay: Optional[Tuple[int, Exception]] = None,
                 uncaptured: Optional[str] = None, rng: str = PER_CAPTURE) -> None:
        self.captures: List[CheckedCapture] = []
        self.fail, self.fail_replay, self.uncaptured, self.rng = fail, fail_replay, uncaptured, rng
        self.written: Set[int] = set()
        self.warmups = 0

    @contextlib.contextmanager
    def warmup(self) -> Iterator[None]:
        self.warmups += 1
        yield

    def new_capture(self, generators: Sequence[torch.Generator]) -> CheckedCapture:
        backend = self

        class Failing(CheckedCapture):
            def capture(self, fn):
                raise backend.fail

        capture = (Failing if self.fail is not None else CheckedCapture)(generators, self.written, self.uncaptured,
                                                                         self.fail_replay)
        self.captures.append(capture)
        return capture
