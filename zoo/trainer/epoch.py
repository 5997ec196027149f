"""One epoch of the loop, as device work only: evaluate a state of every replica, then train one epoch.

Transductive tasks (:class:`~zoo.trainer.views.TransductiveView`): one full-batch forward gives
state ``e``'s training loss and its gradient (the next step's) and, without dropout, the
evaluation logits too (the training-mode logits are then the evaluation logits: one forward
saved).  Graph tasks (:class:`~zoo.trainer.views.GraphListView`): evaluation passes over every
split, and one training pass over shuffled mini-batches whose mean loss is the next state's
training loss.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops.sparse_linear import DeferredGrad, deferred_weight_grads
from zoo.trainer.config import SPLITS
from zoo.trainer.optim import ReplicaOptimizer
from zoo.trainer.replicas import Replicas
from zoo.trainer.stopping import Evaluation
from zoo.trainer.views import TransductiveView, score

LossFn = Callable[[Tensor, Tensor], Tensor]


class WeightGradDeferral:
    """Whether the training loss's gradients may leave the first layer's CSR weight gradient to the
    step (:func:`zoo.ops.sparse_linear.deferred_weight_grads`; the optimiser folds it into a plain
    SGD step: one pass over that weight instead of three).

    That needs every deferred gradient to reach the loop untouched (its weight used once), which the
    first call learns with the numbers computed as usual; from the second on, where it held, the
    numbers are left to the step.  A model whose gradients then stop reaching it untouched would
    have read uninitialised memory: an error, not a silent difference."""

    def __init__(self) -> None:
        self.holds: Optional[bool] = None  # None: not learnt yet

    def grads(self, loss: Tensor, params: Sequence[Tensor]) -> Tuple[Tuple[Tensor, ...], Dict[int, DeferredGrad]]:
        """``torch.autograd.grad(loss, params)`` and the deferred ones among them, by index."""
        if self.holds is False:
            return torch.autograd.grad(loss, params), {}
        with deferred_weight_grads(compute=self.holds is None) as pending:
            grads = torch.autograd.grad(loss, params)
        found = {i: d for d in pending for i, g in enumerate(grads) if d.holds(g)}
        untouched = bool(pending) and len(found) == len(pending)
        if self.holds is None:
            self.holds = untouched
            return grads, {}  # computed as usual this time
        if not untouched:
            raise RuntimeError("a deferred weight gradient did not reach the step untouched (its weight "
                               "gained another use after the first epoch)")
        return grads, found


def evaluate(task: Any, replicas: Replicas, view: Any, loss_fn: LossFn, *, with_grads: bool, deterministic: bool,
             last_pass_loss: Optional[Tensor], deferral: Optional[WeightGradDeferral] = None) -> Evaluation:
    """Every replica's metrics and losses at its current state; ``with_grads``: also the training
    loss's gradients (transductive; the step that follows uses them), through ``deferral`` if given."""
    if isinstance(view, TransductiveView):
        return _evaluate_full_batch(task, replicas, view, loss_fn, with_grads, deterministic, deferral)
    with torch.no_grad():
        per_split = {}
        for s in SPLITS:
            outs, ys = zip(*(view.run(replicas, b, train=False) for b in view.batches(s, shuffle=False)))
            per_split[s] = (torch.cat(outs, 1), torch.cat(ys, 0))
        scores = torch.stack([score(task, *per_split[s]) for s in SPLITS], 1)
        val_loss = loss_fn(*per_split["val"])
        train_loss = (last_pass_loss if last_pass_loss is not None
                      else loss_fn(*per_split["train"])).to(torch.float64)
    return Evaluation(scores, train_loss, val_loss.to(torch.float64))


def _evaluate_full_batch(task: Any, replicas: Replicas, view: TransductiveView, loss_fn: LossFn, with_grads: bool,
                         deterministic: bool, deferral: Optional[WeightGradDeferral]) -> Evaluation:
    logits = replicas.forward(*view.inputs(), train=True)
    train_loss = loss_fn(view.rows(logits, "train"), view.targets["train"])
    grads, deferred = None, {}
    if with_grads and deferral is not None:
        grads, deferred = deferral.grads(train_loss.sum(), replicas.params)
    elif with_grads:
        grads = torch.autograd.grad(train_loss.sum(), replicas.params)
    with torch.no_grad():
        eval_logits = logits.detach() if deterministic else replicas.forward(*view.inputs(), train=False)
        scores = view.scores(task, eval_logits)
        val_loss = loss_fn(view.rows(eval_logits, "val"), view.targets["val"])
        train_loss = train_loss.detach().to(torch.float64)
    return Evaluation(scores, train_loss, val_loss.to(torch.float64), grads, deferred)


def train_epoch(replicas: Replicas, view: Any, loss_fn: LossFn, optimizer: ReplicaOptimizer, active: Tensor,
                grads: Optional[Sequence[Tensor]], deferred: Mapping[int, DeferredGrad] = {}) -> Optional[Tensor]:
    """One optimisation epoch of the ``active`` replicas; returns the pass's ``(R,)`` mean training
    loss on graph tasks (``None`` on transductive ones, whose step uses ``grads`` and ``deferred``)."""
    if isinstance(view, TransductiveView):
        assert grads is not None
        optimizer.step(grads, active, deferred)
        return None
    total = torch.zeros(replicas.size, dtype=torch.float64, device=active.device)
    count = 0
    for batch in view.batches("train", shuffle=True):
        out, y = view.run(replicas, batch, train=True)
        loss = loss_fn(out, y)
        g = torch.autograd.grad(loss.sum(), replicas.params)
        optimizer.step(g, active & torch.isfinite(loss))
        total += loss.detach().to(torch.float64)
        count += 1
    return total / max(count, 1)
