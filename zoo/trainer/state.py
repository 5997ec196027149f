"""The per-replica state the training loop carries from one epoch to the next.

Every field is a tensor with a leading replica dimension ``R`` on the replicas' device, updated in
place by tensor ops only (the stopping and selection objects of :mod:`zoo.trainer.stopping`), so an
epoch's bookkeeping needs no host read and a captured epoch (:mod:`zoo.trainer.graphs`) finds every
field at the address it was captured with; the host reads it where the loop decides to (and at the end, for
the records).  :meth:`LoopState.state_dict` is this state in the mid-run resume file
(:mod:`zoo.trainer.resume`): the field list below is the only list of its keys.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import torch
from torch import Tensor

#: Why a replica stopped, by code (``stop_reason``; 0: still running).  A replica meeting several
#: criteria in one epoch gets the first of this order.
STOP_REASONS = ("", "diverged", "converged", "patience", "max_epochs")


def _per_replica(doc: str) -> Any:
    return field(metadata={"per_replica": doc})


@dataclass
class LoopState:
    """Selection and stopping state of ``R`` replicas (see :mod:`zoo.trainer.loop` for the protocol)."""

    active: Tensor = _per_replica("(R,) bool: still training")
    best_val: Tensor = _per_replica("(R,) float64: the selection key of the selected state")
    best_other: Tensor = _per_replica("(R,) float64: best of the other validation score (patience_on = either)")
    best_metrics: Tensor = _per_replica("(R, 3) float64: train / val / test metric of the selected state")
    best_losses: Tensor = _per_replica("(R, 2) float64: train / val loss of the selected state")
    best_epoch: Tensor = _per_replica("(R,) long: the selected epoch (-1: none)")
    since_best: Tensor = _per_replica("(R,) long: epochs since the patience counter was last reset")
    diverged_epoch: Tensor = _per_replica("(R,) long: epoch of a non-finite training loss (-1: none)")
    stop_epoch: Tensor = _per_replica("(R,) long: epoch the replica stopped at (-1: running)")
    stop_reason: Tensor = _per_replica("(R,) long: index into STOP_REASONS")
    #: graph tasks: the ``(R,)`` mean training loss of the last pass (the next state's training loss)
    last_pass_loss: Optional[Tensor] = None
    #: the selected parameters (stacked like the replicas'), when the run keeps them
    best_state: Optional[List[Tensor]] = None

    @classmethod
    def start(cls, replicas: int, device: torch.device, params: Optional[Sequence[Tensor]] = None) -> "LoopState":
        """The state before epoch 0; ``params``: keep the best parameters, starting from these."""
        f64 = dict(dtype=torch.float64, device=device)
        long = dict(dtype=torch.long, device=device)
        return cls(active=torch.ones(replicas, dtype=torch.bool, device=device),
                   best_val=torch.full((replicas,), -math.inf, **f64),
                   best_other=torch.full((replicas,), -math.inf, **f64),
                   best_metrics=torch.full((replicas, 3), math.nan, **f64),
                   best_losses=torch.full((replicas, 2), math.nan, **f64),
                   best_epoch=torch.full((replicas,), -1, **long),
                   since_best=torch.zeros(replicas, **long),
                   diverged_epoch=torch.full((replicas,), -1, **long),
                   stop_epoch=torch.full((replicas,), -1, **long),
                   stop_reason=torch.zeros(replicas, **long),
                   best_state=None if params is None else [p.detach().clone() for p in params])

    @staticmethod
    def tensor_keys() -> List[str]:
        return [f.name for f in dataclasses.fields(LoopState) if "per_replica" in f.metadata]

    def keep_best(self, params: Sequence[Tensor], improved: Tensor) -> None:
        """Copy the parameters of the ``improved`` replicas into the kept best state."""
        if self.best_state is None:
            return
        with torch.no_grad():
            for b, p in zip(self.best_state, params):
                b.copy_(torch.where(improved.view(-1, *([1] * (p.dim() - 1))), p, b))

    def set_pass_loss(self, loss: Optional[Tensor]) -> None:
        """Keep a graph task's pass loss (in place once there is one: a captured epoch writes it)."""
        if loss is None or self.last_pass_loss is None:
            self.last_pass_loss = loss
        else:
            self.last_pass_loss.copy_(loss)

    def reasons(self) -> List[str]:
        """Every replica's stop reason (``""`` while running); reads the device."""
        return [STOP_REASONS[c] for c in self.stop_reason.tolist()]

    def state_dict(self) -> Dict[str, Any]:
        """The resume file's loop entries: ``loop`` (the per-replica tensors), ``reason`` and
        ``running`` (host lists), ``last_pass_loss``, ``best_state``; reads the device.

        The stop reasons are saved as names and ``running`` beside them, the layout of the
        resume files written before the reasons were tensors, so those still resume."""
        loop = {k: getattr(self, k) for k in self.tensor_keys() if k != "stop_reason"}
        return {"loop": loop, "reason": self.reasons(), "running": self.active.tolist(),
                "last_pass_loss": self.last_pass_loss, "best_state": self.best_state}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (tensors already on the device); the best state only if this
        run keeps one."""
        for key in self.tensor_keys():
            if key != "stop_reason":
                setattr(self, key, saved["loop"][key])
        codes = [STOP_REASONS.index(r) for r in saved["reason"]]
        self.stop_reason = torch.tensor(codes, dtype=torch.long, device=self.active.device)
        self.last_pass_loss = saved["last_pass_loss"]
        if self.best_state is not None:
            self.best_state = saved["best_state"]
