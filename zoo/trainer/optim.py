"""Optimisers over *stacked* parameters: every tensor has a leading replica dimension ``R``.

Each replica's update is exactly what an independent ``torch.optim`` optimiser would do to
that replica alone (same formulas and order of operations as ``torch.optim.SGD`` / ``Adam`` /
``AdamW`` with their defaults), and a boolean ``active`` mask of shape ``(R,)`` freezes
stopped replicas: neither their parameters nor their optimiser state change.

Learning-rate schedule: optional linear warm-up, ``lr_t = lr * min(1, t / warmup_epochs)``
for step ``t = 1, 2, ...`` (the nonlocal paper's Post-LN recipe), then constant; or, with a
:class:`StackedPlateau` scheduler (``lr_scheduler = "plateau"``), each replica's ``lr`` cut by
``factor`` when its validation loss stops improving, as ``torch.optim.lr_scheduler.ReduceLROnPlateau``
(the LN authors' ``train_deepgat_depth.py``); or an epoch schedule (``step``, ``multistep``,
``exponential``, ``cosine``: :mod:`zoo.trainer.schedules`).  The warm-up multiplies any of them.
With ``grad_clip_norm`` set, :class:`ReplicaOptimizer` clips each replica's gradient to that global
norm before its step (:mod:`zoo.trainer.clipping`).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

import torch
from torch import Tensor

from zoo._names import normalize_name, unknown_name_error
from zoo.ops.sparse_linear import DeferredGrad
from zoo.trainer.clipping import clip_replica_grads
from zoo.trainer.config import EPOCH_SCHEDULE_DEFAULTS, LR_SCHEDULERS, OPTIMIZERS, TrainConfig, plateau_options
from zoo.trainer.resume import load_tensor_state, tensor_state
from zoo.trainer.schedules import StackedEpochSchedule


class StackedOptimizer(Protocol):
    def step(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor) -> None:
        """Update ``params`` in place from ``grads`` for replicas where ``active`` is true."""


def _expand(mask: Tensor, like: Tensor) -> Tensor:
    return mask.view(-1, *([1] * (like.dim() - 1)))


class _Columns:
    """A per-replica ``(R,)`` factor as a column broadcasting against each parameter, cast once per dtype.

    The cast used to run once per parameter and step (and a ``float32`` parameter paid a kernel
    for it); the values are the same.
    """

    def __init__(self, values: Tensor) -> None:
        self.values = values
        self.by_dtype: Dict[torch.dtype, Tensor] = {}

    def like(self, p: Tensor) -> Tensor:
        v = self.by_dtype.get(p.dtype)
        if v is None:
            v = self.by_dtype[p.dtype] = self.values.to(p.dtype)
        return _expand(v, p)


class _Base:
    def __init__(self, params: Sequence[Tensor], lr: float, weight_decay: float, warmup_epochs: int) -> None:
        if lr <= 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.lr, self.weight_decay, self.warmup = float(lr), float(weight_decay), int(warmup_epochs)
        replicas = params[0].size(0)
        # Per-replica step counts: stopped replicas do not advance (matters for Adam and warm-up).
        self.steps = torch.zeros(replicas, dtype=torch.float64, device=params[0].device)
        #: ``(R,)`` float64 per-replica learning rates set by a scheduler (``None``: ``lr`` for all).
        self.replica_lr: Optional[Tensor] = None
        #: whether a step may read its ``active`` mask on the host (to take the in-place path)
        self.host_reads = False
        self._constant_lr: Optional[_Columns] = None

    def _all(self, mask: Tensor) -> bool:
        """Whether every entry of ``mask`` is true, asked only where host reads are free."""
        return self.host_reads and bool(mask.all())

    def lr_at(self, steps: Tensor) -> Tensor:
        base = self.replica_lr
        if self.warmup <= 0:
            return torch.full_like(steps, self.lr) if base is None else base.clone()
        return (self.lr if base is None else base) * torch.clamp(steps / self.warmup, max=1.0)

    def lr_columns(self, steps: Tensor) -> "_Columns":
        """:meth:`lr_at` as columns; a constant rate (no warm-up, no scheduler) is made and cast once,
        not at every step (the same values)."""
        if self.warmup > 0 or self.replica_lr is not None:
            return _Columns(self.lr_at(steps))
        if self._constant_lr is None:
            self._constant_lr = _Columns(self.lr_at(steps))
        return self._constant_lr


# Two update paths with the same kernels on the same operands, so a replica's numbers do not
# depend on which one ran (bitwise; tested).  The masked one keeps each replica's new values where
# ``active`` (``torch.where`` written into the state tensor) and reads nothing on the host: every
# device takes it by default.  The in-place one is for every replica active; the optimiser takes it
# only where reading the mask on the host is free (``host_reads``: the CPU, when the loop reads
# its stop flags every epoch anyway).  One fused ``addcmul_`` / ``addcdiv``-style pass per tensor
# replaced ``p.sub_(lr * d)`` (a temporary and a second pass over each parameter: on Cornell's
# 15 x 64 x 1703 first-layer weight the step was ~18 % of a stacked epoch); the fused kernel may
# round ``p - lr * d`` once instead of twice (an FMA), within 1e-12 of ``torch.optim`` (tested).


def _keep(mask: Tensor, new: Tensor, old: Tensor) -> None:
    """``old[r] = new[r]`` where ``mask[r]``, in place."""
    torch.where(mask, new, old, out=old)


class StackedSGD(_Base):
    """``torch.optim.SGD`` (momentum, dampening 0, coupled weight decay) per replica."""

    def __init__(self, params: Sequence[Tensor], lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 warmup_epochs: int = 0) -> None:
        super().__init__(params, lr, weight_decay, warmup_epochs)
        self.momentum = float(momentum)
        self.buffers: List[Tensor] = [torch.zeros_like(p) for p in params] if momentum else []

    @torch.no_grad()
    def step(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor,
             deferred: Mapping[int, DeferredGrad] = {}) -> None:
        """``deferred``: the parameters (by index) whose gradient is a :class:`DeferredGrad`, folded
        into its product where the step is plain (every replica active, no momentum, no weight
        decay), else computed first; the numbers are the same."""
        steps = self.steps + active.to(self.steps.dtype)
        lr = self.lr_columns(steps)
        if deferred:
            params, grads = self._fold(params, grads, active, lr, deferred)
        if not self.momentum:  # no buffer: the first step is like any other (no mask to make or read)
            if self._all(active):
                self._step_in_place(params, grads, lr, False)
            else:
                self._step_masked(params, grads, active, lr, None)
        else:
            first = steps == 1
            if self._all(active) and (self._all(first) or not bool(first.any())):
                self._step_in_place(params, grads, lr, bool(first[0]))
            else:
                self._step_masked(params, grads, active, lr, first)
        self.steps.copy_(steps)  # in place: a captured step reads and writes this tensor

    def _fold(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor, lr: _Columns,
              deferred: Mapping[int, DeferredGrad]) -> Tuple[Sequence[Tensor], Sequence[Tensor]]:
        """Step the deferred gradients' parameters that the fused kernel serves (computing the
        others' gradients); returns the parameters and gradients left to step."""
        plain = not self.momentum and not self.weight_decay and self._all(active)
        folded = {i for i, d in deferred.items() if plain and d.sgd_step(params[i], lr.like(params[i]).view(-1))}
        for i, d in deferred.items():
            if i not in folded:
                d.compute()
        if not folded:
            return params, grads
        keep = [i for i in range(len(params)) if i not in folded]  # no momentum: no buffer indexed by position
        return [params[i] for i in keep], [grads[i] for i in keep]

    def _step_in_place(self, params: Sequence[Tensor], grads: Sequence[Tensor], lr: _Columns, first: bool) -> None:
        # every replica active and at the same phase: the masked update's values, computed in place
        for i, (p, g) in enumerate(zip(params, grads)):
            d = g + self.weight_decay * p if self.weight_decay else g
            if self.momentum:
                buf = self.buffers[i]
                buf.copy_(d) if first else buf.mul_(self.momentum).add_(d)
                d = buf
            p.addcmul_(lr.like(p), d, value=-1)

    def _step_masked(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor, lr: _Columns,
                     first: Optional[Tensor]) -> None:
        for i, (p, g) in enumerate(zip(params, grads)):
            m = _expand(active, p)
            d = g + self.weight_decay * p if self.weight_decay else g
            if self.momentum:
                assert first is not None
                buf = self.buffers[i]
                # torch: the first step's buffer is the gradient itself
                new_buf = torch.where(_expand(first, p), d, buf * self.momentum + d)
                _keep(m, new_buf, buf)
                d = new_buf
            _keep(m, p.addcmul(lr.like(p), d, value=-1), p)


class StackedAdam(_Base):
    """``torch.optim.Adam`` (``decoupled=False``) or ``AdamW`` (``decoupled=True``) per replica."""

    def __init__(self, params: Sequence[Tensor], lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, warmup_epochs: int = 0, decoupled: bool = False) -> None:
        super().__init__(params, lr, weight_decay, warmup_epochs)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps, self.decoupled = float(eps), decoupled
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]

    @torch.no_grad()
    def step(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor) -> None:
        steps = self.steps + active.to(self.steps.dtype)
        safe = torch.clamp(steps, min=1.0)  # inactive replicas at step 0 must not divide by zero
        lr = self.lr_at(steps)
        bias1 = 1 - self.beta1 ** safe
        bias2_sqrt = _Columns(torch.sqrt(1 - self.beta2 ** safe))
        step_size = _Columns(lr / bias1)
        decay = _Columns(1 - lr * self.weight_decay) if self.decoupled and self.weight_decay else None
        if self._all(active):
            self._step_in_place(params, grads, decay, step_size, bias2_sqrt)
        else:
            self._step_masked(params, grads, active, decay, step_size, bias2_sqrt)
        self.steps.copy_(steps)  # in place: a captured step reads and writes this tensor

    def _denominator(self, m2: Tensor, bias2_sqrt: _Columns) -> Tensor:
        return m2.sqrt().div_(bias2_sqrt.like(m2)).add_(self.eps)

    def _step_in_place(self, params: Sequence[Tensor], grads: Sequence[Tensor], decay: Optional[_Columns],
                       step_size: _Columns, bias2_sqrt: _Columns) -> None:
        # every replica active: the masked update's values (same kernels, same order), in place
        for p, g, m1, m2 in zip(params, grads, self.exp_avg, self.exp_avg_sq):
            if decay is not None:
                p.mul_(decay.like(p))
            elif self.weight_decay:
                g = g + self.weight_decay * p
            m1.lerp_(g, 1 - self.beta1)
            m2.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            ratio = self._denominator(m2, bias2_sqrt)
            torch.div(m1, ratio, out=ratio)
            p.addcmul_(step_size.like(p), ratio, value=-1)

    def _step_masked(self, params: Sequence[Tensor], grads: Sequence[Tensor], active: Tensor,
                     decay: Optional[_Columns], step_size: _Columns, bias2_sqrt: _Columns) -> None:
        for p, g, m1, m2 in zip(params, grads, self.exp_avg, self.exp_avg_sq):
            m = _expand(active, p)
            base = p
            if decay is not None:
                base = p * decay.like(p)
            elif self.weight_decay:
                g = g + self.weight_decay * p
            new_m1 = torch.lerp(m1, g, 1 - self.beta1)
            new_m2 = (m2 * self.beta2).addcmul_(g, g, value=1 - self.beta2)
            update = base.addcmul(step_size.like(p), new_m1 / self._denominator(new_m2, bias2_sqrt), value=-1)
            _keep(m, new_m1, m1)
            _keep(m, new_m2, m2)
            _keep(m, update, p)


def make_optimizer(name: str, params: Sequence[Tensor], *, lr: float, weight_decay: float = 0.0,
                   momentum: float = 0.0, betas=(0.9, 0.999), eps: float = 1e-8,
                   warmup_epochs: int = 0) -> StackedOptimizer:
    key = normalize_name(name)
    if key == "sgd":
        return StackedSGD(params, lr, momentum=momentum, weight_decay=weight_decay, warmup_epochs=warmup_epochs)
    if key in ("adam", "adamw"):
        if momentum:
            raise ValueError("momentum is an SGD option; Adam uses betas")
        return StackedAdam(params, lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                           warmup_epochs=warmup_epochs, decoupled=key == "adamw")
    raise unknown_name_error("optimizer", name, OPTIMIZERS)


class StackedPlateau:
    """``torch.optim.lr_scheduler.ReduceLROnPlateau`` (mode ``"min"``) for each of ``R`` replicas.

    ``step(values, active)`` is the torch scheduler's ``step(value)`` for every active replica:
    a value better than the best so far (``rel``: ``< best * (1 - threshold)``; ``abs``:
    ``< best - threshold``) resets the bad-epoch count, else it grows; during ``cooldown``
    epochs it is held at 0; when it exceeds ``patience`` the replica's lr becomes
    ``max(lr * factor, min_lr)`` (only if that lowers it by more than ``eps``) and the count
    restarts.  ``lr`` is an ``(R,)`` float64 tensor updated in place; an optimiser reads it
    through its ``replica_lr``.  Stopped replicas (``active`` false) keep their state.
    """

    def __init__(self, replicas: int, lr: float, device: Any = None, **options: Any) -> None:
        opts = plateau_options(options)
        self.factor, self.patience, self.threshold = opts["factor"], opts["patience"], opts["threshold"]
        self.relative, self.cooldown = opts["threshold_mode"] == "rel", opts["cooldown"]
        self.min_lr, self.eps = opts["min_lr"], opts["eps"]
        f64 = dict(dtype=torch.float64, device=device)
        self.lr = torch.full((replicas,), float(lr), **f64)
        self.best = torch.full((replicas,), math.inf, **f64)
        self.bad_epochs = torch.zeros(replicas, dtype=torch.long, device=device)
        self.cooldown_left = torch.zeros(replicas, dtype=torch.long, device=device)

    @torch.no_grad()
    def step(self, values: Tensor, active: Tensor) -> None:
        values = values.to(torch.float64)
        bar = self.best * (1 - self.threshold) if self.relative else self.best - self.threshold
        better = values < bar  # NaN is never better, as in torch
        best = torch.where(better, values, self.best)
        bad = torch.where(better, 0, self.bad_epochs + 1)
        cooling = self.cooldown_left > 0
        cooldown_left = torch.where(cooling, self.cooldown_left - 1, self.cooldown_left)
        bad = torch.where(cooling, 0, bad)
        reduce = bad > self.patience
        cut = torch.clamp(self.lr * self.factor, min=self.min_lr)
        lr = torch.where(reduce & (self.lr - cut > self.eps), cut, self.lr)
        cooldown_left = torch.where(reduce, self.cooldown, cooldown_left)
        bad = torch.where(reduce, 0, bad)
        for mine, new in ((self.best, best), (self.bad_epochs, bad), (self.cooldown_left, cooldown_left),
                          (self.lr, lr)):
            mine.copy_(torch.where(active, new, mine))


def make_lr_scheduler(name: str, replicas: int, lr: float, device: Any = None,
                      options: Optional[Mapping[str, Any]] = None, epochs: int = 0) -> Optional[StackedScheduler]:
    """The stacked scheduler ``name`` (``None`` for ``"none"``, which must have no options);
    ``epochs``: the run's, ``cosine``'s default ``T_max``."""
    key = normalize_name(name)
    if key == "none":
        if options:
            raise ValueError(f"lr_scheduler_kwargs {dict(options)!r} given without an lr_scheduler; "
                             "set an lr_scheduler (e.g. \"step\") or drop them")
        return None
    if key == "plateau":
        return StackedPlateau(replicas, lr, device, **dict(options or {}))
    if key in EPOCH_SCHEDULE_DEFAULTS:
        return StackedEpochSchedule(key, replicas, lr, epochs, device, options)
    raise unknown_name_error("lr_scheduler", name, LR_SCHEDULERS)


#: a stacked scheduler: its ``(R,)`` float64 ``lr`` (read by the optimiser) and ``step(values, active)``
StackedScheduler = Union[StackedPlateau, StackedEpochSchedule]


def optimizer_state(opt: StackedOptimizer) -> Dict[str, List[Tensor]]:
    """The per-replica state tensors (for tests: a frozen replica's state must not change)."""
    out: Dict[str, List[Tensor]] = {"steps": [opt.steps]}  # type: ignore[attr-defined]
    for name in ("buffers", "exp_avg", "exp_avg_sq"):
        if hasattr(opt, name):
            out[name] = getattr(opt, name)
    return out


class ReplicaOptimizer:
    """The stacked optimiser of ``cfg`` for a :class:`~zoo.trainer.replicas.Replicas`, reading the
    scheduler's per-replica learning rates.

    Made at once, so that a bad optimiser setting fails before any training.  Before the first
    step the replicas may store their parameters in their gradients' layout
    (:meth:`~zoo.trainer.replicas.Replicas.adopt_layout`); the optimiser is then made again, its
    state (all zero so far) in the new layout.
    """

    def __init__(self, replicas: Any, cfg: TrainConfig, scheduler: Optional[StackedScheduler]) -> None:
        self.replicas, self.cfg, self.scheduler = replicas, cfg, scheduler
        #: whether a step may read its mask on the host (the loop sets it where that is free)
        self.host_reads = False
        self.fresh = True  # no step taken yet: the parameters may still take their gradients' layout
        self.opt = self._make()

    def _make(self) -> StackedOptimizer:
        cfg = self.cfg
        made = make_optimizer(cfg.optimizer, self.replicas.params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                              momentum=cfg.momentum, betas=cfg.betas, warmup_epochs=cfg.warmup_epochs)
        if self.scheduler is not None:
            made.replica_lr = self.scheduler.lr  # type: ignore[attr-defined]  (updated in place by the scheduler)
        return made

    def allow_host_reads(self, allowed: bool) -> None:
        """Let the steps read their ``active`` mask on the host (the in-place path when all are active)."""
        self.host_reads = allowed
        self.opt.host_reads = allowed  # type: ignore[attr-defined]

    def folds_steps(self) -> bool:
        """Whether :meth:`step` may fold a deferred gradient into the step: plain SGD (no momentum,
        weight decay, clipping, warm-up or scheduler) reading its mask on the host."""
        opt = self.opt
        return (isinstance(opt, StackedSGD) and not opt.momentum and not opt.weight_decay and opt.warmup <= 0
                and self.scheduler is None and self.cfg.grad_clip_norm is None and self.host_reads)

    def step(self, grads: Sequence[Tensor], active: Tensor, deferred: Mapping[int, DeferredGrad] = {}) -> None:
        """One step from ``grads``; ``deferred``: the indices of those that are :class:`DeferredGrad`
        storage (their numbers not computed yet; folded into the step or computed first)."""
        if self.fresh:
            self.fresh = False
            if self.replicas.adopt_layout(grads):  # reads the gradients' layout only
                self.opt = self._make()
                self.opt.host_reads = self.host_reads  # type: ignore[attr-defined]
        if deferred and not isinstance(self.opt, StackedSGD):
            for d in deferred.values():
                d.compute()
            deferred = {}
        if self.cfg.grad_clip_norm is not None:
            for d in deferred.values():
                d.compute()
            deferred = {}
            grads = clip_replica_grads(grads, self.cfg.grad_clip_norm)
        if deferred:
            self.opt.step(self.replicas.params, grads, active, deferred)  # type: ignore[call-arg]
        else:
            self.opt.step(self.replicas.params, grads, active)

    def state_dict(self) -> Dict[str, Any]:
        return tensor_state(self.opt)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into an optimiser made for the replicas' (restored) parameters."""
        self.fresh = False
        self.opt = self._make()
        self.opt.host_reads = self.host_reads  # type: ignore[attr-defined]
        load_tensor_state(self.opt, state)
