"""The self-check of a captured epoch: the loop's state kept and put back, and an eager epoch compared
with a replayed one (:class:`zoo.trainer.graphs.EpochGraphs` runs it once per group, right after the
capture and before any replayed number is used).

What an epoch changes lives in a few *holders* (the replicas, the optimiser and its stacked state,
the lr scheduler, the :class:`~zoo.trainer.state.LoopState`): :class:`Snapshot` keeps each holder's
attributes (so a rebinding is undone) and a copy of every tensor they hold (put back *in place*, so
the captured programs keep reading and writing the same memory), the replicas' random streams and
torch's global generator.  :func:`observe` lists an epoch's outcome (the metrics and losses of the
evaluated state and every tensor the holders carry to the next epoch) and :func:`first_difference`
compares two such lists within :func:`tolerance`.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

#: relative and absolute tolerance of the self-check by the dtype the epoch computes in: CUDA's
#: atomic scatter-adds make two eager epochs differ in the last bits already, so the check allows a
#: few thousand rounding steps of one epoch; integer and boolean state (stop epochs, reasons, the
#: running mask) must be equal.  A difference beyond it re-runs the group eagerly: a false alarm
#: costs time, never a number.
TOLERANCE = {torch.float64: 1e-9, torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-2}

Holders = Callable[[], Mapping[str, Any]]


def tolerance(dtype: torch.dtype, precision: str = "fp32") -> float:
    """The self-check's tolerance for a model in ``dtype`` trained at ``precision`` (``bf16``: autocast)."""
    if precision != "fp32":
        return TOLERANCE[torch.bfloat16]
    return TOLERANCE.get(dtype, TOLERANCE[torch.float32])


def carried(holders: Mapping[str, Any]) -> Iterator[Tuple[str, Tensor]]:
    """``(name, tensor)`` of every tensor the holders keep: their tensor attributes and the tensors in
    their list, tuple and dict attributes (one level), each tensor once, in a fixed order."""
    seen = set()
    for key, obj in holders.items():
        if obj is None:
            continue
        for attr, value in sorted(vars(obj).items()):
            for name, t in _tensors(f"{key}.{attr}", value):
                if id(t) not in seen:
                    seen.add(id(t))
                    yield name, t


def _tensors(name: str, value: Any) -> Iterator[Tuple[str, Tensor]]:
    if isinstance(value, Tensor):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, Tensor):
                yield f"{name}[{i}]", v
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            if isinstance(value[k], Tensor):
                yield f"{name}[{k!r}]", value[k]


class Snapshot:
    """The loop's state now, to be put back by :meth:`restore` (see the module docstring)."""

    def __init__(self, holders: Mapping[str, Any], rng: Any) -> None:
        self.holders = {k: v for k, v in holders.items() if v is not None}
        self.attrs = {k: dict(vars(v)) for k, v in self.holders.items()}
        with torch.no_grad():
            self.tensors = [(t, t.detach().clone()) for _, t in carried(self.holders)]
        self.rng = rng
        self.streams = {k: s.clone() for k, s in rng.get_state().items()} if rng is not None else None
        self.torch_rng = torch.get_rng_state()

    def restore(self) -> None:
        for key, obj in self.holders.items():
            vars(obj).clear()
            vars(obj).update(self.attrs[key])
        with torch.no_grad():
            for t, saved in self.tensors:
                t.copy_(saved)
        if self.rng is not None:
            self.rng.set_state({k: s.clone() for k, s in self.streams.items()})
        torch.set_rng_state(self.torch_rng)


def observe(ev: Any, holders: Mapping[str, Any]) -> List[Tuple[str, Tensor]]:
    """An epoch's outcome: the evaluated state's metrics and losses, and copies of every carried tensor."""
    with torch.no_grad():
        out = [("metrics", ev.scores.detach().clone()), ("train_loss", ev.train_loss.detach().clone()),
               ("val_loss", ev.val_loss.detach().clone())]
        return out + [(name, t.detach().clone()) for name, t in carried(holders)]


def first_difference(eager: List[Tuple[str, Tensor]], replayed: List[Tuple[str, Tensor]],
                     tol: float) -> Optional[str]:
    """Where the replayed epoch differs from the eager one beyond ``tol`` (reads the device), or ``None``."""
    if [n for n, _ in eager] != [n for n, _ in replayed]:
        return "the replayed epoch carries other state than the eager one"
    for (name, a), (_, b) in zip(eager, replayed):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{name} is {tuple(b.shape)} {b.dtype} replayed, {tuple(a.shape)} {a.dtype} eager"
        if a.is_floating_point():
            close = torch.isclose(b, a, rtol=tol, atol=tol, equal_nan=True)
            if not bool(close.all()):
                gap = (b.double() - a.double()).abs().nan_to_num(float("inf"))[~close].max()
                return f"{name} differs from the eager epoch by up to {float(gap):.3g} (tolerance {tol:g})"
        elif not torch.equal(a, b):
            return f"{name} differs from the eager epoch"
    return None

