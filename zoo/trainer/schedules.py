"""Learning-rate schedules that are functions of the epoch, for ``R`` stacked replicas, on the device.

Each replica's learning rate is the closed form of the torch scheduler of the same name at that
replica's own epoch count ``e`` (epochs it has trained; a stopped replica's count and lr stay):

* ``step`` (``StepLR``): ``lr * gamma ** (e // step_size)``
* ``multistep`` (``MultiStepLR``): ``lr * gamma ** (number of milestones <= e)``
* ``exponential`` (``ExponentialLR``): ``lr * gamma ** e``
* ``cosine`` (``CosineAnnealingLR``): ``eta_min + (lr - eta_min) * (1 + cos(pi * e / T_max)) / 2``,
  ``T_max`` defaulting to the run's ``epochs`` (past ``T_max`` the cosine goes on, as torch's)

The epoch ``e`` training step uses ``f(e)``, as a torch loop calling ``scheduler.step()`` after
every epoch; equal to the torch schedulers' ``get_last_lr()`` to float64 rounding (tested: torch
updates the lr recursively, these are closed forms).  The state is two ``(R,)`` device tensors,
``epochs`` and ``lr`` (the optimiser reads ``lr`` as its ``replica_lr``, in place), updated by
tensor ops only: no host read, and a CUDA graph may capture a step.  Both are in the resume state
(the scheduler's tensors, :func:`zoo.trainer.resume.snapshot`).

A linear warm-up (``warmup_epochs = W``) multiplies whichever schedule by ``min(1, t / W)`` at
optimiser step ``t`` (:class:`zoo.trainer.optim.StackedSGD` / ``StackedAdam``): the schedule
itself runs from epoch 0, unshifted.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import torch
from torch import Tensor

from zoo.trainer.config import epoch_schedule_options


class StackedEpochSchedule:
    """One of the epoch schedules above for ``R`` replicas (``name``: ``step``, ``multistep``,
    ``exponential`` or ``cosine``; ``options`` as torch's, checked by
    :func:`~zoo.trainer.config.epoch_schedule_options`)."""

    def __init__(self, name: str, replicas: int, lr: float, epochs: int, device: Any = None,
                 options: Optional[Mapping[str, Any]] = None) -> None:
        opts = epoch_schedule_options(name, dict(options or {}))
        self.name, self.base = name, float(lr)
        self.gamma = float(opts.get("gamma", 1.0))
        self.step_size = opts.get("step_size")
        self.t_max = opts.get("T_max") or max(int(epochs), 1)
        self.eta_min = float(opts.get("eta_min", 0.0))
        #: ``(M,)`` sorted milestones (``multistep``), searched on the device
        self.milestones = (torch.tensor(opts["milestones"], dtype=torch.long, device=device)
                           if name == "multistep" else None)
        self.epochs = torch.zeros(replicas, dtype=torch.long, device=device)
        self.lr = torch.full((replicas,), self.base, dtype=torch.float64, device=device)

    def lr_at(self, epochs: Tensor) -> Tensor:
        """The ``(R,)`` float64 learning rates at per-replica epoch counts ``epochs``."""
        e = epochs.to(torch.float64)
        if self.name == "cosine":
            return self.eta_min + (self.base - self.eta_min) * (1 + torch.cos(e * (math.pi / self.t_max))) / 2
        if self.name == "step":
            k = torch.div(epochs, self.step_size, rounding_mode="floor").to(torch.float64)
        elif self.name == "multistep":
            k = torch.bucketize(epochs, self.milestones, right=True).to(torch.float64)
        else:
            k = e
        return self.base * torch.pow(self.gamma, k)

    @torch.no_grad()
    def step(self, values: Optional[Tensor], active: Tensor) -> None:
        """One epoch more for every ``active`` replica (``values``, a validation loss, is unused)."""
        epochs = self.epochs + active.to(self.epochs.dtype)
        self.epochs.copy_(epochs)
        self.lr.copy_(torch.where(active, self.lr_at(epochs), self.lr))

