"""Count (or forbid) host-synchronising tensor operations, on any device, the CPU included.

On a GPU an op whose result the host needs (a Python number, a list, a branch on a tensor, a
data-dependent output shape) waits for the device queue to drain.  On the CPU nothing waits, so
such ops are found by name instead:

* at the dispatcher (a ``TorchDispatchMode``): ``_local_scalar_dense`` / ``item`` (``int()``,
  ``float()``, ``bool()`` of a tensor), ``is_nonzero``, ``equal``, ``nonzero``, ``masked_select``,
  ``unique*``, ``repeat_interleave`` without ``output_size``, and indexing by a boolean mask (it
  calls ``nonzero`` inside the kernel, below the dispatcher);
* in Python (the methods are patched while counting, since on the CPU they do not go through
  the dispatcher): ``Tensor.tolist``, ``.numpy``, ``.cpu``, ``.__bool__``, ``.item``.

:class:`EpochWindow` counts only between two epochs of :func:`zoo.trainer.loop.train_replicas`
(as its first callback), so that setup, warm-up and the final read of the results are outside.
"""
from __future__ import annotations

import traceback
from collections import Counter
from typing import Any, Dict, List, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_ATEN_SYNCS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "nonzero", "masked_select", "unique",
               "_unique", "_unique2", "unique_consecutive", "unique_dim"}
_PY_METHODS = ("tolist", "numpy", "cpu", "__bool__", "item")


def _bool_index(args: Tuple[Any, ...]) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in (indices or ()) if i is not None)


class HostSyncCounter(TorchDispatchMode):
    """While entered: every host-synchronising op is counted by name (``counts``), with the first
    stack of each name kept (``where``) so that a failing test says which line it was."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()
        self.where: Dict[str, str] = {}
        self._saved: Dict[str, Any] = {}
        self._depth = 0  # a patched Python method calls into the dispatcher: count it once

    def _hit(self, name: str) -> None:
        self.counts[name] += 1
        self.where.setdefault(name, "".join(traceback.format_stack(limit=12)[:-2]))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if self._depth == 0:
            if name in _ATEN_SYNCS:
                self._hit(f"aten.{name}")
            elif name in ("index", "index_put", "index_put_") and _bool_index(args):
                self._hit(f"aten.{name}[bool mask]")
            elif name == "repeat_interleave" and (kwargs or {}).get("output_size") is None:
                self._hit("aten.repeat_interleave")
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        for name in _PY_METHODS:
            original = getattr(torch.Tensor, name)
            self._saved[name] = original
            setattr(torch.Tensor, name, self._wrap(name, original))
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved.clear()
        return out

    def _wrap(self, name: str, original: Any) -> Any:
        counter = self

        def method(tensor, *args, **kwargs):
            if counter._depth == 0:
                counter._hit(f"Tensor.{name}")
            counter._depth += 1
            try:
                return original(tensor, *args, **kwargs)
            finally:
                counter._depth -= 1

        return method

    def report(self) -> str:
        return "\n".join(f"{name} x{n}, first at:\n{self.where[name]}" for name, n in self.counts.most_common())


class EpochWindow:
    """A callback for ``train_replicas`` (put it first) that counts host syncs from the end of epoch
    ``first``'s bookkeeping to the end of epoch ``last``'s: everything the loop does in between
    (the other callbacks, host checks, lr schedule, training steps, the next evaluations and
    bookkeeping).  ``per_epoch`` is the count divided by ``last - first``.  It reads nothing itself
    (``syncs_host = False``)."""

    syncs_host = False

    def __init__(self, first: int, last: int) -> None:
        assert 0 <= first < last
        self.first, self.last = first, last
        self.seen = -1  # the epoch whose bookkeeping was reported last
        self.counter = HostSyncCounter()
        self.closed = False

    def on_epoch_end(self, state: Any) -> None:
        self.seen = int(state.epoch)
        if self.seen == self.first:
            self.counter.__enter__()
        elif self.seen == self.last and not self.closed:
            self.counter.__exit__(None, None, None)
            self.closed = True

    def close(self) -> None:
        """Leave the counter if the run ended inside the window (all replicas stopped)."""
        if self.first <= self.seen < self.last and not self.closed:
            self.counter.__exit__(None, None, None)
            self.closed = True

    @property
    def epochs(self) -> int:
        return min(self.seen, self.last) - self.first

    @property
    def per_epoch(self) -> float:
        return sum(self.counter.counts.values()) / max(self.epochs, 1)

    def counts(self) -> Dict[str, int]:
        return dict(self.counter.counts)


def window_counts(run: Any, first: int, last: int) -> Tuple[EpochWindow, Any]:
    """Call ``run(window)`` with an :class:`EpochWindow`; returns the window and ``run``'s result."""
    window = EpochWindow(first, last)
    try:
        out = run(window)
    finally:
        window.close()
    return window, out


__all__: List[str] = ["HostSyncCounter", "EpochWindow", "window_counts"]

