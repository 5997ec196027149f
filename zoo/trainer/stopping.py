"""Divergence, model selection and stopping as small objects over per-replica masks.

Each object reads one evaluated state (:class:`Evaluation`) and updates the per-replica tensors of
a :class:`~zoo.trainer.state.LoopState` with tensor ops only: no host read, so an epoch's
bookkeeping can stay on the device.  The state's tensors are written in place (:func:`put`), never
rebound, so a captured epoch (:mod:`zoo.trainer.graphs`) reads and writes the same memory at every
replay; the epoch to record may be a device tensor for the same reason.  :class:`Bookkeeping`
applies them in the protocol's order (divergence, selection, stopping); :func:`bookkeeping` builds
it from a :class:`~zoo.trainer.config.TrainConfig`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Protocol, Sequence, Union

import torch
from torch import Tensor

from zoo.trainer.config import TrainConfig
from zoo.trainer.state import STOP_REASONS, LoopState


#: An epoch to record: the host's count, or a 0-dim long device tensor (a captured epoch, replayed
#: at every epoch, reads its number from the device).
Stamp = Union[int, Tensor]


def put(into: Tensor, mask: Tensor, value: Union[Tensor, int, float]) -> None:
    """``into[r] = value[r]`` where ``mask[r]`` (``value`` broadcasts), in place."""
    if isinstance(value, Tensor):
        torch.where(mask, value, into, out=into)
    else:
        into.masked_fill_(mask, value)


@dataclass
class Evaluation:
    """One evaluated state of every replica: ``scores`` ``(R, 3)`` train / val / test metric,
    ``train_loss`` and ``val_loss`` ``(R,)`` float64, and (transductive, while training) the
    training loss's gradients; ``deferred``: those of them (by index) whose numbers are not computed
    yet (:class:`zoo.ops.sparse_linear.DeferredGrad`, for the step)."""

    scores: Tensor
    train_loss: Tensor
    val_loss: Tensor
    grads: Optional[Sequence[Tensor]] = None
    deferred: Mapping[int, Any] = field(default_factory=dict)


class StoppingCriterion(Protocol):
    """Stops replicas: ``stops`` gives the ``(R,)`` mask of running (``live``) replicas it stops at
    state ``epoch``, or ``None`` when it stops none; ``reason`` is one of :data:`STOP_REASONS`."""

    reason: str

    def stops(self, state: LoopState, epoch: int, ev: "Evaluation", live: Tensor) -> Optional[Tensor]: ...


class Divergence:
    """A non-finite training loss marks an active replica diverged at that epoch; it stops, and
    its state is not selected (its best state before that still counts)."""

    reason = "diverged"

    def update(self, state: LoopState, epoch: Stamp, ev: Evaluation) -> Tensor:
        """``(R,)`` replicas diverging now; records their epoch."""
        bad = state.active & ~torch.isfinite(ev.train_loss)
        put(state.diverged_epoch, bad, epoch)
        return bad


class Selection:
    """Keeps each replica's best state by ``select`` (ties: ``select_ties``) and counts the epochs
    since its last improvement for :class:`Patience` (``patience_on = "either"``: an improvement of
    the validation loss or metric, whichever is not the selection key, also restarts the count)."""

    def __init__(self, select: str, ties: str = "first", patience_on: str = "select") -> None:
        self.select, self.ties, self.patience_on = select, ties, patience_on

    def key(self, epoch: Stamp, ev: Evaluation) -> Tensor:
        key = {"val_metric": lambda: ev.scores[:, 1], "val_loss": lambda: -ev.val_loss,
               "train_metric": lambda: ev.scores[:, 0],
               "last": lambda: _epoch_column(epoch, ev.val_loss)}[self.select]()
        return torch.nan_to_num(key, nan=-math.inf)

    def update(self, state: LoopState, epoch: Stamp, ev: Evaluation, live: Tensor) -> Tensor:
        """``(R,)`` replicas whose state ``epoch`` is now the selected one."""
        key = self.key(epoch, ev)
        # select_ties = "last": an epoch that equals the best score so far replaces it (patience still
        # waits for a strict improvement)
        reset = live & (key > state.best_val)
        improved = live & (key >= state.best_val) & (key > -math.inf) if self.ties == "last" else reset
        if self.patience_on == "either":  # Oxford report: waiting restarts when val loss or val metric improves
            other = torch.nan_to_num(ev.scores[:, 1] if self.select == "val_loss" else -ev.val_loss, nan=-math.inf)
            other_improved = live & (other > state.best_other)
            put(state.best_other, other_improved, other)
            reset = reset | other_improved
        put(state.best_val, improved, key)
        put(state.best_metrics, improved.unsqueeze(1), ev.scores)
        put(state.best_losses, improved.unsqueeze(1), torch.stack([ev.train_loss, ev.val_loss], 1))
        put(state.best_epoch, improved, epoch)
        state.since_best.add_(1).masked_fill_(reset, 0)
        return improved


class LossThreshold:
    """Stop a replica whose training loss is ``<= threshold``."""

    reason = "converged"

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def stops(self, state: LoopState, epoch: int, ev: Evaluation, live: Tensor) -> Optional[Tensor]:
        return live & (ev.train_loss <= self.threshold)


class Patience:
    """Stop a replica ``patience`` epochs after its last improvement (:class:`Selection`'s count)."""

    reason = "patience"

    def __init__(self, patience: int) -> None:
        self.patience = patience

    def stops(self, state: LoopState, epoch: int, ev: Evaluation, live: Tensor) -> Optional[Tensor]:
        return live & (state.since_best >= self.patience)


class MaxEpochs:
    """Stop every running replica at ``epoch == epochs`` (``None`` before: decided on the host's epoch count)."""

    reason = "max_epochs"

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def stops(self, state: LoopState, epoch: int, ev: Evaluation, live: Tensor) -> Optional[Tensor]:
        return live if epoch == self.epochs else None


class Bookkeeping:
    """Divergence, then selection, then the stopping criteria (in :data:`STOP_REASONS` order) of
    one evaluated state; updates the :class:`LoopState` and returns the replicas whose selected
    state is now this one."""

    def __init__(self, selection: Selection, criteria: Sequence[StoppingCriterion]) -> None:
        self.divergence = Divergence()
        self.selection = selection
        self.criteria: List[StoppingCriterion] = sorted(criteria, key=lambda c: STOP_REASONS.index(c.reason))

    def update(self, state: LoopState, epoch: int, ev: Evaluation, stamp: Optional[Tensor] = None) -> Tensor:
        """``stamp``: the epoch to record as a device tensor (a captured epoch); ``epoch`` then only
        decides the host's criteria (the last epoch is never captured)."""
        at: Stamp = epoch if stamp is None else stamp
        bad = self.divergence.update(state, at, ev)
        live = state.active & ~bad
        improved = self.selection.update(state, at, ev, live)
        stops = [(STOP_REASONS.index(Divergence.reason), bad)]
        for criterion in self.criteria:
            mask = criterion.stops(state, epoch, ev, live)
            if mask is not None:
                stops.append((STOP_REASONS.index(criterion.reason), mask))
        stopping = stops[0][1]
        for _, mask in stops[1:]:
            stopping = stopping | mask
        for reason, mask in reversed(stops):  # the first criterion met names the reason
            put(state.stop_reason, mask, reason)
        put(state.stop_epoch, stopping, at)
        torch.logical_and(state.active, ~stopping, out=state.active)
        return improved


def _epoch_column(epoch: Stamp, like: Tensor) -> Tensor:
    """The epoch as a column like ``like`` (the selection key of ``select = "last"``)."""
    if isinstance(epoch, Tensor):
        return epoch.to(like.dtype).expand_as(like)
    return torch.full_like(like, float(epoch))


def bookkeeping(cfg: TrainConfig) -> Bookkeeping:
    """The protocol of ``cfg``: ``loss_threshold = 0`` is no loss stop (float32 cross-entropy reaches
    exactly 0.0 on confident models), ``patience = None`` none either."""
    criteria: List[StoppingCriterion] = [MaxEpochs(cfg.epochs)]
    if cfg.loss_threshold > 0:
        criteria.append(LossThreshold(cfg.loss_threshold))
    if cfg.patience:
        criteria.append(Patience(cfg.patience))
    return Bookkeeping(Selection(cfg.select, cfg.select_ties, cfg.patience_on), criteria)
