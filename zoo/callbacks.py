"""Training callbacks: what ``zoo.fit`` shows a callback after every evaluated epoch.

A callback is any object with ``on_epoch_end(state: EpochState)`` (and optionally
``on_fit_end(state: EpochState)``, called once with the last state).  A callback that keeps a
state across epochs may give ``state_dict()`` and ``load_state_dict(state)``: a run that saves its
loop's state to resume later (``zoo bench``'s long groups, :mod:`zoo.trainer.resume`) saves the
callback's with it and gives it back on resume, so the callback goes on as if the run had not
stopped (callbacks without them are called from the resumed epoch on).  The progress bar is a
callback too (:mod:`zoo.trainer.progress`).  ``zoo.fit`` trains R
replicas together (seeds x inits, stacked), so the state holds every parameter as a stacked
``(R, ...)`` tensor; :meth:`EpochState.replica` gives one replica as an ordinary module (with
``.grad`` set) for the diagnostics that read modules (:mod:`zoo.diagnostics`).

Timing (the runner's protocol, :mod:`zoo.trainer.loop`): ``state.epoch = e`` is the state after
``e`` optimisation epochs; the callback runs after that state was evaluated and the stopping
rule applied, before the next step.  ``state.grads`` is the gradient of state ``e``'s training
loss, the one the next step uses (transductive tasks; ``None`` at the last state, where no
step follows, and on mini-batch tasks, whose gradients are per batch).

Host reads: a callback that turns the state into Python numbers (``.tolist()``, ``float(...)``)
makes the device wait every epoch, so the loop then reads its stop flags every epoch as well and
the callback sees no epoch after the last replica stopped.  A callback that only keeps device
tensors may set the class attribute ``syncs_host = False``: the run stays free of host reads
between the loop's checks (``TrainConfig.check_every``), and the callback also sees the epochs
up to the next check, in which every replica is frozen (``state.active`` all false).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

import torch
from torch import Tensor, nn

__all__ = ["Callback", "EpochState", "check_callbacks"]


@runtime_checkable
class Callback(Protocol):
    def on_epoch_end(self, state: "EpochState") -> None: ...


@dataclass
class EpochState:
    """One evaluated epoch of ``R`` replicas (read-only for callbacks, with one exception: a
    callback may change ``params`` in place by a symmetry of the network, provided it transforms
    ``grads`` so that they stay the gradients at the new parameters, as
    :class:`zoo.rescale.DynamicRescaling` does; the next step then trains the same function).

    Shapes: ``params[i]`` / ``grads[i]`` ``(R, *shape of parameter names[i])``; every entry of
    ``metrics`` ``(R,)`` float64: ``train`` / ``val`` / ``test`` (the task's metric), ``train_loss``,
    ``val_loss``; ``active`` ``(R,)`` bool: replicas that go on training after this epoch.
    """

    epoch: int
    names: List[str]
    params: List[Tensor]
    grads: Optional[List[Tensor]]
    metrics: Dict[str, Tensor]
    active: Tensor
    labels: List[str]
    base: nn.Module
    inputs: Optional[Tuple[Any, ...]] = None  # (edge_index, x) of a transductive task, else None
    buffers: Dict[str, Tensor] = field(default_factory=dict)  # stacked (R, ...) buffers
    scratch: Dict[str, Any] = field(default_factory=dict, repr=False)  # reused across epochs by the trainer

    @property
    def size(self) -> int:
        return len(self.labels)

    def replica(self, r: int) -> nn.Module:
        """Replica ``r`` as a module (a copy of the architecture holding its parameters, and their
        gradients in ``.grad`` when ``grads`` is set), in eval mode.  The same module object is
        reused for every call: read what you need before asking for another replica."""
        if not 0 <= r < self.size:
            raise IndexError(f"replica {r} out of range: this fit trains {self.size} replica(s)")
        model = self.scratch.get("model")
        if model is None:
            model = copy.deepcopy(self.base)
            self.scratch["model"] = model
        own = dict(model.named_parameters())
        with torch.no_grad():
            for i, name in enumerate(self.names):
                p = own[name]
                p.copy_(self.params[i][r])
                p.grad = None if self.grads is None else self.grads[i][r].detach().clone()
            own_buffers = dict(model.named_buffers())
            for name, b in self.buffers.items():
                own_buffers[name].copy_(b[r])
        return model.eval()


def check_callbacks(callbacks: Optional[Sequence[Any]]) -> List[Any]:
    """The callbacks as a list (one callback alone is a list of one); anything without ``on_epoch_end``
    is a one-line ``TypeError``."""
    if callable(getattr(callbacks, "on_epoch_end", None)):
        return [callbacks]
    out = list(callbacks or [])
    for cb in out:
        if not callable(getattr(cb, "on_epoch_end", None)):
            raise TypeError(f"callback {cb!r} has no on_epoch_end(state) method; pass objects such as "
                            "zoo.diagnostics.ConservationRecorder() or your own class with on_epoch_end")
    return out
