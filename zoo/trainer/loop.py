"""The training loop: R replicas of one architecture (:mod:`zoo.trainer.replicas`) trained together.

Each replica has its own optimiser state (:mod:`zoo.trainer.optim`), early stopping and model
selection (:mod:`zoo.trainer.stopping`, on the per-replica tensors of
:class:`~zoo.trainer.state.LoopState`): a stopped replica's parameters and optimiser state are
frozen by a mask.  An epoch's work and bookkeeping — training step, evaluation, selection (the kept
best parameters copied with ``torch.where`` on the improved mask), patience / loss / divergence
stops and the lr schedule — are device tensor ops with no host read.  The host reads the stop flags
once every ``K = check_every`` epochs (:func:`_any_running`, at states ``e`` with ``(e + 1) % K == 0``;
by default every epoch on the CPU, where a read waits for nothing and the optimiser may then take
its in-place path, and every 25 on a GPU),
and the run ends at the first such check where every replica has stopped; the epochs run past the
last replica's stop change nothing (every replica is frozen), so the records are those of a check
every epoch.  The resume state is written only at a check (a due save makes one: its
save reads the device anyway).  Callbacks opt out of this: one that reads the metrics on the host
reads the device every epoch, so the loop then checks every epoch too (the callbacks see each
evaluated state up to the last stop, as before).  A callback that only keeps device tensors says
so with ``syncs_host = False`` (:class:`~zoo.trainer.history.MetricsRecorder`, the one ``zoo.fit``
adds) and keeps the run sync-free; it then also sees the epochs up to the next check, where every
replica is frozen.  A run with no other callbacks is free of host synchronisation between checks,
on every device (tested under a dispatch mode on the CPU).  Not covered: task metrics other than
plain accuracy (``task.evaluate``, e.g. ROC-AUC, read each replica's outputs) and shuffled
mini-batches of graphs, which are collated on the host every epoch and copied to the device.
An epoch is two halves, *assess* (evaluate state ``e``, bookkeeping, selection) and *advance* (lr
schedule, training step), with the callbacks and the host check between them; on CUDA both are
captured once as CUDA graphs after a few eager epochs, checked against an eager epoch and replayed
(``cuda_graphs``, :mod:`zoo.trainer.graphs`; each result's ``extra["cuda_graphs"]`` says how it ran).

Epoch protocol (balance paper §3).  ``epoch e`` is the state after ``e`` optimisation epochs,
``e = 0 .. epochs``.  For each ``e``: evaluate the state (train/val/test metric, val loss);
keep it if it has the best validation score so far (ties keep the earlier epoch, or the later
with ``select_ties = "last"``; the reported
test score is the one at that epoch and ``best_epoch`` is the epochs-to-best); stop the replica
if its training loss ``<= loss_threshold`` (``0``: never), if ``patience`` epochs passed without a better
validation score, or at ``e = epochs``; otherwise train one epoch.  A non-finite training
loss marks the replica *diverged* at that epoch and stops it; its best state before that
still counts.  ``select = "last"`` keeps every state, so the reported one is the last (the LN
authors' protocol: test accuracy after the final epoch).  With ``lr_scheduler = "plateau"``
each replica's learning rate follows ``ReduceLROnPlateau`` on the validation loss of states
``1, 2, ...`` (the state after each step, as the authors step it; state 0 is not seen).
Transductive tasks: one full-batch step per epoch, and the training loss is the
loss of state ``e``.  Inductive / graph tasks: one pass over mini-batches of graphs (batch
order fixed by ``data_seed``, shared by all replicas), and the training loss is the pass mean.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from zoo.callbacks import EpochState
from zoo._allocator import tune_allocator
from zoo.trainer.config import CHECK_EVERY, TrainConfig
from zoo.trainer.epoch import WeightGradDeferral, evaluate, train_epoch
from zoo.trainer.graphs import epoch_graphs
from zoo.trainer.optim import ReplicaOptimizer, make_lr_scheduler
from zoo.trainer.replicas import Replicas, train_mode_differs
from zoo.trainer.results import RunResult, run_results
from zoo.trainer.resume import ResumeFile, restore, saved_cpu_s, snapshot
from zoo.trainer.state import LoopState
from zoo.trainer.stopping import Evaluation, bookkeeping
from zoo.trainer.subnormals import FLUSHED, subnormal_mode
from zoo.trainer.views import TransductiveView, loss_function


def train_replicas(task: Any, replicas: Replicas, view: Any, cfg: TrainConfig, seeds: Sequence[int],
                   callbacks: Sequence[Any] = (), labels: Optional[Sequence[str]] = None,
                   resume: Optional[ResumeFile] = None) -> List[RunResult]:
    """Train every replica of ``replicas`` on ``task`` under ``cfg`` (see the module docstring).

    ``callbacks``: objects with ``on_epoch_end(state)`` (:class:`zoo.callbacks.EpochState`), called
    after every evaluated state, and optionally ``on_fit_end(state)`` with the last one; they only
    read (the progress bar is one, :mod:`zoo.trainer.progress`), so the training is the same with or
    without them.  ``labels`` names the replicas for them.
    ``resume``: resume from its saved state if it has one, and save the loop's state when it
    is due (:mod:`zoo.trainer.resume`); the numbers are those of an uninterrupted run, and the
    callbacks with ``state_dict`` / ``load_state_dict`` get their state back (the others are called
    from the resumed epoch on).
    ``cfg.flush_subnormals``: the loop runs with subnormals flushed (else kept) on this thread, and the
    mode it found is put back after it (:func:`zoo.trainer.subnormals.subnormal_mode`); each result's
    ``extra["subnormals"]`` then says so.
    """
    with subnormal_mode(cfg.flush_subnormals, replicas.params[0].device):
        results = _train(task, replicas, view, cfg, callbacks, labels, resume)
    if cfg.flush_subnormals:
        for res in results:
            res.extra["subnormals"] = FLUSHED
    return results


def _train(task: Any, replicas: Replicas, view: Any, cfg: TrainConfig, callbacks: Sequence[Any],
           labels: Optional[Sequence[str]], resume: Optional[ResumeFile]) -> List[RunResult]:
    """:func:`train_replicas`' loop, in the run's subnormal mode."""
    device = replicas.params[0].device
    if device.type == "cpu":
        tune_allocator()
    loss_fn, _ = loss_function(task)
    scheduler = make_lr_scheduler(cfg.lr_scheduler, replicas.size, cfg.lr, device, cfg.lr_scheduler_kwargs,
                                  cfg.epochs)
    optimizer = ReplicaOptimizer(replicas, cfg, scheduler)  # now: a bad optimiser setting fails before training
    rules = bookkeeping(cfg)
    state = LoopState.start(replicas.size, device, replicas.params if cfg.keep_best_state else None)
    # no dropout, no batch statistics: the training logits are the evaluation logits
    deterministic = not train_mode_differs(replicas.base)
    scratch: Dict[str, Any] = {}  # the callbacks' replica module, built once
    seen: Optional[EpochState] = None

    start = time.perf_counter()
    first_epoch, resumed_s = 0, 0.0
    saved = resume.load() if resume is not None else None
    resumed_cpu = saved_cpu_s(saved)
    cpu_start = None if resumed_cpu is None else time.process_time() - resumed_cpu
    if saved is not None:  # the loop's state after epoch ``first_epoch - 1``'s training step
        first_epoch, resumed_s = restore(saved, replicas, optimizer, scheduler, view, state, callbacks)
        start -= resumed_s
    check_every = _check_every(cfg, device, callbacks)
    graphs = epoch_graphs(cfg, device, task, view, replicas, first_epoch)  # replays the epoch on CUDA
    # the in-place step reads the mask on the host: free on the CPU when the loop reads it every epoch anyway
    optimizer.allow_host_reads(device.type == "cpu" and check_every == 1 and not graphs.replays)
    # a plain SGD step may take the first layer's CSR weight gradient folded in (no callback sees the gradients)
    deferral = (WeightGradDeferral() if device.type == "cpu" and not callbacks and optimizer.folds_steps()
                and isinstance(view, TransductiveView) else None)

    def assess(epoch: int, stamp: Optional[Tensor]) -> Evaluation:  # state ``epoch``: evaluate, select, stop
        ev = evaluate(task, replicas, view, loss_fn, with_grads=epoch < cfg.epochs, deterministic=deterministic,
                      last_pass_loss=state.last_pass_loss, deferral=deferral)
        state.keep_best(replicas.params, rules.update(state, epoch, ev, stamp))
        return ev

    def advance(epoch: int, ev: Evaluation) -> None:  # the training step from state ``epoch``
        if scheduler is not None and epoch >= 1:  # the lr of step epoch + 1, from state epoch's val loss
            scheduler.step(ev.val_loss, state.active)
        state.set_pass_loss(train_epoch(replicas, view, loss_fn, optimizer, state.active, ev.grads, ev.deferred))

    graphs.bind(assess, advance, lambda: {"replicas": replicas, "optimizer": optimizer, "optimizer.opt": optimizer.opt,
                                          "scheduler": scheduler, "state": state}, replicas.rng)
    last = first_epoch
    for epoch in range(first_epoch, cfg.epochs + 1):
        last = epoch
        ev = graphs.assess(epoch)
        if callbacks:
            seen = _epoch_state(epoch, replicas, view, graphs.for_callbacks(ev), state.active, labels, scratch)
            for cb in callbacks:
                cb.on_epoch_end(seen)
        saving = resume is not None and resume.due(epoch)  # a save reads the device: a check too
        check = saving or (epoch + 1) % check_every == 0
        if epoch == cfg.epochs or (check and not _any_running(state)):
            break
        graphs.advance(epoch, ev)
        if saving:
            cpu_s = None if cpu_start is None else time.process_time() - cpu_start
            resume.save(snapshot(epoch + 1, time.perf_counter() - start, replicas, optimizer, scheduler, view,
                                 state, callbacks, cpu_s=cpu_s))

    for cb in callbacks:
        if callable(getattr(cb, "on_fit_end", None)):
            cb.on_fit_end(seen)
    extra = {"cuda_graphs": graphs.status,
             **({"resumed_at_epoch": first_epoch, "resumed_elapsed_s": resumed_s} if first_epoch else {}),
             **({"resumed_cpu_s": resumed_cpu} if first_epoch and resumed_cpu is not None else {})}
    return run_results(state, replicas, last, time.perf_counter() - start, scheduler, extra)


def _check_every(cfg: TrainConfig, device: torch.device, callbacks: Sequence[Any]) -> int:
    """Epochs between host checks: 1 when a callback reads the host every epoch anyway (it then sees
    no epoch past the last stop; one that only keeps device tensors says ``syncs_host = False``),
    else ``cfg.check_every`` (default: 1 on the CPU, :data:`~zoo.trainer.config.CHECK_EVERY` elsewhere)."""
    if any(getattr(cb, "syncs_host", True) for cb in callbacks):
        return 1
    if cfg.check_every is not None:
        return cfg.check_every
    return 1 if device.type == "cpu" else CHECK_EVERY


def _any_running(state: LoopState) -> bool:
    """The host check: whether any replica still trains (a device-to-host read)."""
    return bool(state.active.any())


def _epoch_state(epoch: int, replicas: Replicas, view: Any, ev: Evaluation, active: Tensor,
                 labels: Optional[Sequence[str]], scratch: Dict[str, Any]) -> EpochState:
    """What callbacks see of state ``epoch`` (the tensors themselves, not copies; ``ev`` is
    :meth:`~zoo.trainer.graphs.EpochGraphs.for_callbacks`' view of the evaluation)."""
    return EpochState(
        epoch=epoch, names=replicas.names, params=replicas.params,
        grads=None if ev.grads is None else list(ev.grads),
        metrics={"train": ev.scores[:, 0], "val": ev.scores[:, 1], "test": ev.scores[:, 2],
                 "train_loss": ev.train_loss, "val_loss": ev.val_loss},
        active=active, labels=list(labels) if labels is not None else [str(r) for r in range(replicas.size)],
        base=replicas.base, inputs=view.inputs() if isinstance(view, TransductiveView) else None,
        buffers=replicas.buffers, scratch=scratch)
