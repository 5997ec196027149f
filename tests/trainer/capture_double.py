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

Used by monkeypatching :func:`zoo.trainer.graphs.capture_backend` to return a
:class:`CheckedBackend` on the CPU.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from tests.trainer.host_sync import HostSyncCounter


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


class _Recorder(TorchDispatchMode):
    """Records every op as ``(op, arguments)``: a tensor made during the run is described by its
    layout, one that existed before by its address too; with ``undo``, keeps a copy of every
    pre-existing tensor before its first write."""

    def __init__(self, undo: bool) -> None:
        super().__init__()
        self.undo = undo
        self.trace: List[Tuple[Any, ...]] = []
        self.made: Set[int] = set()
        self.saved: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}

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

    def _save_writes(self, func: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            for t in leaves(value):
                ptr = _storage(t)
                if ptr and ptr not in self.made and ptr not in self.saved:  # the whole storage, as bytes
                    whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                    self.saved[ptr] = (whole, whole.clone())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        entry = (str(func), tuple(self._describe(a) for a in flat))
        if self.undo:
            self._save_writes(func, args, kwargs)
        inputs = {_storage(t) for t in flat if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        outs, _ = tree_flatten(out)
        for t in outs:
            if isinstance(t, torch.Tensor) and _storage(t) not in inputs:
                self.made.add(_storage(t))
        self.trace.append(entry + (tuple(self._describe(t) for t in outs),))
        return out


def _run(fn: Callable[[], Any], recorder: _Recorder) -> Any:
    """``fn()`` under ``recorder``; a host read in it raises :class:`ContractError`."""
    syncs = HostSyncCounter()
    with syncs, recorder:
        out = fn()
    if syncs.counts:
        raise ContractError(f"a captured epoch reads the device on the host:\n{syncs.report()}")
    return out


class CheckedCapture:
    """A capture on the CPU that checks the static-buffer contract (see the module docstring)."""

    def __init__(self, generators: Sequence[torch.Generator]) -> None:
        self.generators = list(generators)
        self.replays = 0

    def capture(self, fn: Callable[[], Any]) -> Any:
        rng = [g.get_state() for g in self.generators], torch.get_rng_state()
        rec = _Recorder(undo=True)
        try:
            out = _run(fn, rec)
        finally:  # a capture runs nothing: undo every write and draw
            with torch.no_grad():
                for whole, copy in rec.saved.values():
                    whole.copy_(copy)
            for g, state in zip(self.generators, rng[0]):
                g.set_state(state)
            torch.set_rng_state(rng[1])
        self.fn, self.trace, self.outputs = fn, rec.trace, out
        self._static = [t.detach() for t in leaves(out)]
        with torch.no_grad():  # outputs the capture made (not state tensors it returns as they are)
            for t in self._static:
                if t.is_floating_point() and _storage(t) in rec.made:
                    t.fill_(float("nan"))
        return out

    def replay(self) -> None:
        rec = _Recorder(undo=False)
        out = _run(self.fn, rec)
        if rec.trace != self.trace:
            at = next(i for i, (a, b) in enumerate(zip(rec.trace + [None], self.trace + [None])) if a != b)
            raise ContractError(f"replay {self.replays + 1} differs from the capture at op {at} of "
                                f"{len(self.trace)}:\n  captured: {self.trace[at] if at < len(self.trace) else None}"
                                f"\n  replayed: {rec.trace[at] if at < len(rec.trace) else None}")
        new = [t.detach() for t in leaves(out)]
        if [(t.shape, t.dtype) for t in new] != [(t.shape, t.dtype) for t in self._static]:
            raise ContractError("the replayed outputs differ in number, shape or dtype from the captured ones")
        with torch.no_grad():
            for static, value in zip(self._static, new):
                static.copy_(value)
        self.replays += 1


class CheckedBackend:
    """:class:`zoo.trainer.graphs.Backend` for the CPU tests: every capture a :class:`CheckedCapture`
    (kept in ``captures``); ``fail`` makes each capture raise it instead (a failed capture)."""

    def __init__(self, fail: Optional[Exception] = None) -> None:
        self.captures: List[CheckedCapture] = []
        self.fail = fail
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

        capture = (Failing if self.fail is not None else CheckedCapture)(generators)
        self.captures.append(capture)
        return capture
