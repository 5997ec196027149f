"""Training loops: R replicas of one architecture trained together (stacked) or one at a time.

A *group* is a list of models with identical architecture that differ only in seed and/or
initialisation.  Their parameters are stacked along a leading replica dimension
(``torch.func.stack_module_state``) and the forward pass is ``vmap(functional_call)``; with
``stacked=False`` every replica is run by a plain Python loop over ``functional_call`` — the
one-at-a-time reference that grouped training must reproduce.  Each replica has its own
optimiser state (:mod:`zoo.bench.run.optim`), early stopping and model selection: a stopped
replica's parameters and optimiser state are frozen by a mask.

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

import ctypes
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch_geometric.data import Batch

from zoo.bench.run.checkpoint import (Checkpointer, generator_states, load_generator_states, load_tensor_state,
                                      restore_params, tensor_state, to_device)
from zoo.bench.run.optim import make_lr_scheduler, make_optimizer
from zoo.bench.spec.config import SELECT, SPLITS, TrainConfig  # noqa: F401  (SELECT, TrainConfig: re-exported)
from zoo.callbacks import EpochState
from zoo.nn.functional import ReplicaRandomness, replica_randomness

@dataclass
class RunResult:
    """What one replica's training produced (metrics at the best validation epoch)."""

    metrics: Dict[str, Optional[float]]
    val_loss: Optional[float]
    train_loss: Optional[float]
    best_epoch: Optional[int]
    epochs_run: int
    stop_reason: str
    diverged: bool
    diverged_epoch: Optional[int]
    wall_time_s: float
    time_per_epoch_s: float
    num_parameters: int
    best_state: Optional[Dict[str, Tensor]] = field(default=None, repr=False)
    extra: Dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- allocator

_ALLOCATOR_TUNED = False


def tune_allocator() -> bool:
    """Keep freed heap memory in this process (glibc): no ``mmap``/``munmap`` per large tensor.

    glibc serves every allocation above its mmap threshold (128 KiB .. 32 MiB) with a fresh
    ``mmap`` and returns it on free, so each epoch's ``(E, R, H, C)`` edge tensors are page-faulted
    in from zero again: on a 2-core CPU that kernel time was 40-60 % of a stacked Cora epoch.
    Serving them from the (never trimmed) heap instead measured 2.6-4x less CPU time per
    replica-epoch (Cora gatv2 L=10, 15 replicas).  Process-wide, once; ``ZOO_TUNE_ALLOCATOR=0``
    opts out; a no-op off glibc.  Returns whether the tuning is in effect.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    if os.environ.get("ZOO_TUNE_ALLOCATOR", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        # M_TRIM_THRESHOLD (-1): never give the heap top back; M_MMAP_MAX (-4) = 0: no mmap'd chunks
        ok = mallopt(-1, 2 ** 30) == 1 and mallopt(-4, 0) == 1
    except (OSError, AttributeError):
        return False
    _ALLOCATOR_TUNED = bool(ok)
    return _ALLOCATOR_TUNED


# --------------------------------------------------------------------------- replicas


class Replicas:
    """R models of one architecture as stacked tensors, with a batched forward.

    ``stacked=True`` runs all replicas in one ``vmap`` call; ``False`` loops over them (the
    reference path).  Dropout (:func:`zoo.nn.functional.dropout`) draws replica ``r``'s masks
    from a stream seeded by ``seeds[r]`` alone, so a replica's numbers do not depend on its group
    or on the path.
    """

    def __init__(self, models: Sequence[nn.Module], stacked: bool = True,
                 seeds: Optional[Sequence[int]] = None) -> None:
        if not models:
            raise ValueError("a group needs at least one model")
        self.base = models[0]
        self.stacked = stacked
        params, buffers = stack_module_state(list(models))
        self.names = list(params)
        self.params: List[Tensor] = [params[n].detach().requires_grad_(True) for n in self.names]
        self.buffers = buffers
        self.size = len(models)
        self.rng = ReplicaRandomness(range(self.size) if seeds is None else seeds)
        self.tokens = torch.arange(self.size, device=self.params[0].device)

    def num_parameters(self) -> int:
        return sum(p[0].numel() for p in self.params)

    def adopt_layout(self, grads: Sequence[Tensor]) -> bool:
        """Store a stacked parameter whose gradient interleaves the replicas in that gradient's layout.

        An op that folds the replicas into one product hands back such a gradient: the first
        layer's stacked CSR product ``X @ [W_1 .. W_R]^T`` multiplies by one ``(F, R*C)`` matrix,
        and its weight gradient comes back in that layout.  With the parameter in ``(R, C, F)``
        order the forward copied it into ``(F, R*C)`` every step and the optimiser read a
        transposed gradient against a row-major parameter (strided; on Cornell, 15 replicas, the
        step took 10 % of the epoch).  Stored like the gradient, the forward's transpose is a view
        and every optimiser pass is contiguous; the values are the same (tested bitwise).
        Gradients that keep the replicas outermost (a per-replica transpose, from batched
        matmuls) are left alone: a transposed operand changes a BLAS product's rounding.
        Call before the optimiser's state exists.  Returns whether any parameter moved.
        """
        moved = False
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if g.shape != p.shape or g.dim() < 2 or g.stride() == p.stride() or g.stride(0) == max(g.stride()):
                continue
            new = torch.empty_like(g, dtype=p.dtype)  # keeps g's strides only if dense and non-overlapping
            if new.stride() != g.stride():
                continue
            self.params[i] = new.copy_(p.detach()).requires_grad_(True)
            moved = True
        return moved

    def _call(self, params: Dict[str, Tensor], buffers: Dict[str, Tensor], token: Tensor, *args: Any) -> Tensor:
        with replica_randomness(self.rng, token):
            return functional_call(self.base, (params, buffers), args)

    def forward(self, *args: Any, train: bool, params: Optional[List[Tensor]] = None) -> Tensor:
        """``(R, ...)`` outputs of every replica on the same inputs ``args``."""
        params = self.params if params is None else params
        self.base.train(train)
        named = dict(zip(self.names, params))
        if self.stacked and self.size > 1:  # one replica: a plain call (vmap costs dispatch per op)
            fn = vmap(self._call, in_dims=(0, 0, 0, *([None] * len(args))), randomness="different")
            return fn(named, self.buffers, self.tokens, *args)
        outs = []
        for r in range(self.size):
            outs.append(self._call({n: p[r] for n, p in named.items()},
                                   {n: b[r] for n, b in self.buffers.items()}, self.tokens[r], *args))
        return outs[0].unsqueeze(0) if self.size == 1 else torch.stack(outs)

    def state_of(self, r: int, params: Optional[List[Tensor]] = None) -> Dict[str, Tensor]:
        params = self.params if params is None else params
        return {n: p[r].detach().clone() for n, p in zip(self.names, params)}


# --------------------------------------------------------------------------- task views


def draws_dropout(model: nn.Module) -> bool:
    """Whether a training-mode forward of ``model`` draws dropout masks: an ``nn.Dropout`` with
    ``p > 0``, or any sub-module's dropout rate above 0 — every numeric attribute whose name ends
    in ``dropout`` (``dropout``, ``attn_dropout``, SAN's ``input_dropout``, ...), since the
    models call :func:`zoo.nn.functional.dropout` with their own rate attributes.

    Reading only the top-level ``dropout`` / ``attn_dropout`` missed SAN's ``input_dropout``:
    its validation and test accuracies were then measured with the input dropout on (issue 23).
    """
    for module in model.modules():
        if isinstance(module, nn.Dropout) and module.p > 0:
            return True
        for name, value in vars(module).items():
            if name.endswith("dropout") and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value > 0:
                return True
    return False


def _labels_and_loss(task: Any) -> Tuple[Callable[[Tensor, Tensor], Tensor], bool]:
    """Per-replica loss ``(R, n, C), (n, ...) -> (R,)`` and whether targets are multi-label."""
    multilabel = bool(task.multilabel) or task.metric == "rocauc"

    def loss_fn(logits: Tensor, y: Tensor) -> Tensor:
        if multilabel:
            target = y.to(logits.dtype).view(y.size(0), -1)
            if target.size(-1) != logits.size(-1):
                raise ValueError(f"{task.name}: {logits.size(-1)} outputs for {target.size(-1)} binary targets")
            valid = ~torch.isnan(target)  # OGB marks missing labels with NaN
            per = F.binary_cross_entropy_with_logits(logits, torch.nan_to_num(target).expand_as(logits),
                                                     reduction="none")
            return (per * valid).sum((1, 2)) / valid.sum().clamp(min=1)
        R, n, C = logits.shape
        per = F.cross_entropy(logits.reshape(R * n, C), y.expand(R, n).reshape(-1), reduction="none")
        return per.view(R, n).mean(-1)

    return loss_fn, multilabel


def _plain_accuracy(task: Any) -> bool:
    """Whether the task's metric is plain single-label accuracy (vectorised over replicas)."""
    return task.metric == "accuracy" and not getattr(task, "ogb_evaluator", None) and not task.multilabel


def score(task: Any, logits: Tensor, y: Tensor) -> Tensor:
    """``(R,)`` task metric of every replica (vectorised for plain accuracy)."""
    if _plain_accuracy(task):
        return (logits.argmax(-1) == y.unsqueeze(0)).to(torch.float64).mean(-1)
    out = []
    for r in range(logits.size(0)):
        try:
            out.append(task.evaluate(logits[r], y))
        except ValueError:  # e.g. ROC-AUC with one class present
            out.append(float("nan"))
    return torch.tensor(out, dtype=torch.float64, device=logits.device)


class _Transductive:
    """One graph, masks per split; one full-batch step per epoch."""

    def __init__(self, task: Any, device: torch.device, dtype: torch.dtype) -> None:
        d = task.data
        self.x = d.x.to(device=device, dtype=dtype)
        self.edge_index = d.edge_index.to(device)
        self.y = d.y.to(device)
        self.masks = {s: getattr(d, f"{s}_mask").to(device) for s in SPLITS}
        for s, m in self.masks.items():
            if m.dim() != 1 or not bool(m.any()):
                raise ValueError(f"{task.name}: the {s} mask must be a non-empty 1-D bool mask, got shape "
                                 f"{tuple(m.shape)} with {int(m.sum())} nodes")
        # Row indices instead of bool masks: a mask is turned into indices (``nonzero``, a device
        # sync on a GPU) every time it indexes, i.e. four times an epoch; the gathered rows are
        # the same, in the same order.
        self.index = {s: m.nonzero().view(-1) for s, m in self.masks.items()}
        self.targets = {s: self.y[i] for s, i in self.index.items()}
        self.plain_accuracy = _plain_accuracy(task)
        if self.plain_accuracy:  # every split's accuracy from one argmax over the labelled rows
            labelled = self.masks["train"] | self.masks["val"] | self.masks["test"]
            self.labelled = labelled.nonzero().view(-1)
            self.labelled_y = self.y[self.labelled]
            # (n, 3) membership: correct @ member counts each split's hits exactly (integers), and
            # / size divides once, as ``mean`` does, so the accuracies are bitwise the per-split means
            self.member = torch.stack([self.masks[s][self.labelled] for s in SPLITS], 1).to(torch.float64)
            self.split_size = self.member.sum(0)

    def rows(self, logits: Tensor, split: str) -> Tensor:
        """``(R, n_split, C)`` rows of ``(R, N, C)`` outputs."""
        return logits.index_select(1, self.index[split])

    def scores(self, task: Any, logits: Tensor) -> Tensor:
        """``(R, 3)`` train / val / test metric of ``(R, N, C)`` outputs."""
        if self.plain_accuracy:
            correct = logits.index_select(1, self.labelled).argmax(-1) == self.labelled_y
            return (correct.to(torch.float64) @ self.member) / self.split_size
        return torch.stack([score(task, self.rows(logits, s), self.targets[s]) for s in SPLITS], 1)

    def inputs(self) -> Tuple[Any, ...]:
        return (self.edge_index, self.x)

    def dry_run(self, model: nn.Module) -> None:
        with torch.no_grad():
            model(*self.inputs())


class _GraphList:
    """Inductive node tasks and graph tasks: mini-batches of graphs merged with PyG ``Batch``.

    Models tied to one graph (GATDB/GATNB: ``graph_tied``) are run graph by graph instead of
    on a merged batch, with the outputs concatenated.
    """

    CACHE_BYTES = 512 * 2 ** 20

    def __init__(self, task: Any, device: torch.device, dtype: torch.dtype, batch_size: int, data_seed: int,
                 graph_tied: bool, edge_features: bool = False) -> None:
        self.task, self.device, self.dtype = task, device, dtype
        self.graph_level = task.kind == "graph"
        self.graph_tied = graph_tied
        self.edge_features = edge_features
        self.graphs = task.graphs
        for s in SPLITS:
            if s not in self.graphs or len(self.graphs[s]) == 0:
                raise ValueError(f"{task.name}: the {s!r} split has no graphs")
        self.batch_size = batch_size
        self.generator = torch.Generator().manual_seed(int(data_seed))
        first = self.graphs["train"][0]
        est = sum(len(g) for g in self.graphs.values()) * first.x.numel() * 4
        self.cache: Optional[Dict[str, List[Any]]] = {} if est <= self.CACHE_BYTES else None

    def _batches(self, split: str, shuffle: bool) -> List[List[int]]:
        n = len(self.graphs[split])
        size = self.batch_size or n
        order = torch.randperm(n, generator=self.generator).tolist() if shuffle and size < n else list(range(n))
        return [order[i:i + size] for i in range(0, n, size)]

    def _prepare(self, indices: List[int], split: str) -> Any:
        graphs = [self.graphs[split][i] for i in indices]
        if self.graph_tied:
            items = []
            for g in graphs:
                y, mask = self._targets(g)
                items.append((g.edge_index.to(self.device), g.x.to(self.device, self.dtype), y, mask))
            return ("tied", items)
        b = Batch.from_data_list(graphs)
        y, mask = self._targets(b)
        edge_attr = getattr(b, "edge_attr", None) if self.edge_features else None
        return ("merged", (b.edge_index.to(self.device), b.x.to(self.device, self.dtype),
                           b.batch.to(self.device), b.num_graphs, y, mask,
                           None if edge_attr is None else edge_attr.to(self.device)))

    def _targets(self, g: Any) -> Tuple[Tensor, Optional[Tensor]]:
        y = g.y.to(self.device)
        mask = getattr(g, "label_mask", None) if not self.graph_level else None
        return y, (mask.to(self.device) if mask is not None else None)

    def batches(self, split: str, shuffle: bool) -> List[Any]:
        if self.cache is not None and not (shuffle and self.batch_size):
            if split not in self.cache:
                self.cache[split] = [self._prepare(ix, split) for ix in self._batches(split, False)]
            return self.cache[split]
        return [self._prepare(ix, split) for ix in self._batches(split, shuffle)]

    def run(self, replicas: "Replicas", batch: Any, train: bool,
            params: Optional[List[Tensor]] = None) -> Tuple[Tensor, Tensor]:
        """``(R, n, C)`` outputs on the labelled rows of ``batch`` and their ``(n, ...)`` targets."""
        kind, payload = batch
        if kind == "tied":
            outs, ys = [], []
            for edge_index, x, y, mask in payload:
                out = replicas.forward(edge_index, x, train=train, params=params)
                if mask is not None:
                    out, y = out[:, mask], y[mask]
                outs.append(out)
                ys.append(y)
            return torch.cat(outs, 1), torch.cat(ys, 0)
        edge_index, x, vec, num_graphs, y, mask, edge_attr = payload
        if self.graph_level:
            return replicas.forward(edge_index, x, vec, num_graphs, edge_attr, train=train, params=params), y
        out = replicas.forward(edge_index, x, train=train, params=params)
        if mask is not None:
            out, y = out[:, mask], y[mask]
        return out, y

    def dry_run(self, model: nn.Module) -> None:
        kind, payload = self._prepare([0], "train")
        with torch.no_grad():
            if kind == "tied":
                edge_index, x, _, _ = payload[0]
                model(edge_index, x)
            elif self.graph_level:
                edge_index, x, vec, num_graphs, _, _, edge_attr = payload
                model(edge_index, x, vec, num_graphs, edge_attr)
            else:
                model(payload[0], payload[1])


# --------------------------------------------------------------------------- the loop


def build_replicas(task: Any, factories: Sequence[Callable[[], nn.Module]], seeds: Sequence[int],
                   device: torch.device, dtype: torch.dtype, cfg: TrainConfig, stacked: bool
                   ) -> Tuple["Replicas", Any]:
    """Seed, build, move and dry-run every replica, then stack them."""
    models = []
    view: Any = None
    for factory, seed in zip(factories, seeds):
        torch.manual_seed(int(seed))
        model = factory().to(device=device, dtype=dtype)
        if view is None:
            gnn = getattr(model, "gnn", model)
            tied = bool(getattr(gnn, "graph_tied", False))
            edges = getattr(gnn, "edge_encoder", None) is not None
            view = (_Transductive(task, device, dtype) if task.kind == "transductive"
                    else _GraphList(task, device, dtype, cfg.batch_size, cfg.data_seed, tied, edges))
        view.dry_run(model)  # materialises lazily-shaped parameters (GATDB's xi) before stacking
        models.append(model)
    return Replicas(models, stacked=stacked, seeds=seeds), view


def _epoch_state(epoch: int, replicas: Replicas, view: Any, grads: Optional[Sequence[Tensor]], scores: Tensor,
                 train_loss: Tensor, val_loss: Tensor, active: Tensor, labels: Optional[Sequence[str]],
                 scratch: Dict[str, Any]) -> Any:
    """What callbacks see of state ``epoch`` (the tensors themselves, not copies)."""
    return EpochState(
        epoch=epoch, names=replicas.names, params=replicas.params,
        grads=None if grads is None else list(grads),
        metrics={"train": scores[:, 0], "val": scores[:, 1], "test": scores[:, 2], "train_loss": train_loss,
                 "val_loss": val_loss},
        active=active, labels=list(labels) if labels is not None else [str(r) for r in range(replicas.size)],
        base=replicas.base, inputs=view.inputs() if isinstance(view, _Transductive) else None,
        buffers=replicas.buffers, scratch=scratch)


def train_replicas(task: Any, replicas: Replicas, view: Any, cfg: TrainConfig, seeds: Sequence[int],
                   progress: Optional[Callable[[int], None]] = None, callbacks: Sequence[Any] = (),
                   labels: Optional[Sequence[str]] = None,
                   checkpoint: Optional[Checkpointer] = None) -> List[RunResult]:
    """Train every replica of ``replicas`` on ``task`` under ``cfg`` (see the module docstring).

    ``callbacks``: objects with ``on_epoch_end(state)`` (:class:`zoo.callbacks.EpochState`), called
    after every evaluated state, and optionally ``on_fit_end(state)`` with the last one; they only
    read, so the training is the same with or without them.  ``labels`` names the replicas for them.
    ``checkpoint``: resume from its saved state if it has one, and save the loop's state when it
    is due (:mod:`zoo.bench.run.checkpoint`); the numbers are those of an uninterrupted run (the
    callbacks' own state is not saved: a resumed group calls them from the resumed epoch on).
    """
    R = replicas.size
    device = replicas.params[0].device
    if device.type == "cpu":
        tune_allocator()
    loss_fn, _ = _labels_and_loss(task)
    scheduler = make_lr_scheduler(cfg.lr_scheduler, R, cfg.lr, device, cfg.lr_scheduler_kwargs)

    def optimizer() -> Any:
        made = make_optimizer(cfg.optimizer, replicas.params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                              momentum=cfg.momentum, betas=cfg.betas, warmup_epochs=cfg.warmup_epochs)
        if scheduler is not None:
            made.replica_lr = scheduler.lr  # updated in place by the scheduler
        return made

    opt = optimizer()  # now, so that a bad optimiser setting fails before any training
    fresh = True  # no step taken yet: the parameters may still take their gradients' layout

    def step(grads: Sequence[Tensor], active: Tensor) -> None:
        nonlocal opt, fresh
        if fresh:
            fresh = False
            if replicas.adopt_layout(grads):
                opt = optimizer()  # its state (all zero so far) in the parameters' new layout
        opt.step(replicas.params, grads, active)

    # Without dropout the training-mode logits are the evaluation logits (one forward saved).
    deterministic = not draws_dropout(replicas.base)
    transductive = isinstance(view, _Transductive)

    active = torch.ones(R, dtype=torch.bool, device=device)
    best_val = torch.full((R,), -math.inf, dtype=torch.float64, device=device)
    best_other = torch.full((R,), -math.inf, dtype=torch.float64, device=device)
    best_metrics = torch.full((R, 3), math.nan, dtype=torch.float64, device=device)
    best_losses = torch.full((R, 2), math.nan, dtype=torch.float64, device=device)  # train, val
    best_epoch = torch.full((R,), -1, dtype=torch.long, device=device)
    since_best = torch.zeros(R, dtype=torch.long, device=device)
    diverged_epoch = torch.full((R,), -1, dtype=torch.long, device=device)
    stop_epoch = torch.full((R,), -1, dtype=torch.long, device=device)
    reason = [""] * R
    running = [True] * R  # ``active`` on the host (stopping is read back once an epoch anyway)
    best_state: Optional[List[Tensor]] = [p.detach().clone() for p in replicas.params] if cfg.keep_best_state else None
    last_pass_loss: Optional[Tensor] = None
    scratch: Dict[str, Any] = {}  # the callbacks' replica module, built once

    start = time.perf_counter()
    epochs_done = 0
    first_epoch, resumed_s = 0, 0.0
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:  # the loop's state after epoch ``next_epoch - 1``'s training step
        saved = to_device(saved, device)
        replicas.params = restore_params(replicas.params, saved["params"])
        for n, b in replicas.buffers.items():  # running statistics, if a norm keeps any
            b.copy_(saved["buffers"][n])
        fresh = False
        opt = optimizer()
        load_tensor_state(opt, saved["optimizer"])
        if scheduler is not None:
            load_tensor_state(scheduler, saved["scheduler"])
        load_generator_states(replicas.rng, saved["replica_rng"])
        if getattr(view, "generator", None) is not None:
            view.generator.set_state(saved["batch_rng"].cpu())
        torch.set_rng_state(saved["torch_rng"].cpu())
        (active, best_val, best_other, best_metrics, best_losses, best_epoch, since_best, diverged_epoch,
         stop_epoch) = (saved["loop"][k] for k in ("active", "best_val", "best_other", "best_metrics",
                                                   "best_losses", "best_epoch", "since_best", "diverged_epoch",
                                                   "stop_epoch"))
        reason, running, last_pass_loss = list(saved["reason"]), list(saved["running"]), saved["last_pass_loss"]
        if best_state is not None:
            best_state = saved["best_state"]
        first_epoch = epochs_done = int(saved["next_epoch"])
        resumed_s = float(saved["elapsed_s"])
        start -= resumed_s
        if progress is not None:
            progress(first_epoch)
    for epoch in range(first_epoch, cfg.epochs + 1):
        grads = None
        # ---- evaluate state `epoch` (and, transductive, compute its training loss + gradient)
        if transductive:
            logits = replicas.forward(*view.inputs(), train=True)
            train_loss = loss_fn(view.rows(logits, "train"), view.targets["train"])
            if epoch < cfg.epochs:
                grads = torch.autograd.grad(train_loss.sum(), replicas.params)
            with torch.no_grad():
                eval_logits = logits.detach() if deterministic else replicas.forward(*view.inputs(), train=False)
                scores = view.scores(task, eval_logits)
                val_loss = loss_fn(view.rows(eval_logits, "val"), view.targets["val"])
                train_loss = train_loss.detach().to(torch.float64)
        else:
            with torch.no_grad():
                per_split = {}
                for s in SPLITS:
                    outs, ys = zip(*(view.run(replicas, b, train=False) for b in view.batches(s, shuffle=False)))
                    per_split[s] = (torch.cat(outs, 1), torch.cat(ys, 0))
                scores = torch.stack([score(task, *per_split[s]) for s in SPLITS], 1)
                val_loss = loss_fn(*per_split["val"])
                train_loss = (last_pass_loss if last_pass_loss is not None
                              else loss_fn(*per_split["train"])).to(torch.float64)
        val_loss = val_loss.to(torch.float64)

        # ---- divergence, selection, stopping (all on device; one sync per epoch)
        bad = active & ~torch.isfinite(train_loss)
        diverged_epoch = torch.where(bad, epoch, diverged_epoch)
        live = active & ~bad
        key = {"val_metric": scores[:, 1], "val_loss": -val_loss, "train_metric": scores[:, 0],
               "last": torch.full_like(val_loss, float(epoch))}[cfg.select]
        key = torch.nan_to_num(key, nan=-math.inf)
        # select_ties = "last": an epoch that equals the best score so far replaces it (patience still
        # waits for a strict improvement)
        reset = live & (key > best_val)
        improved = live & (key >= best_val) & (key > -math.inf) if cfg.select_ties == "last" else reset
        if cfg.patience_on == "either":  # Oxford report: waiting restarts when val loss or val metric improves
            other = torch.nan_to_num(scores[:, 1] if cfg.select == "val_loss" else -val_loss, nan=-math.inf)
            other_improved = live & (other > best_other)
            best_other = torch.where(other_improved, other, best_other)
            reset = reset | other_improved
        best_val = torch.where(improved, key, best_val)
        best_metrics = torch.where(improved.unsqueeze(1), scores, best_metrics)
        best_losses = torch.where(improved.unsqueeze(1), torch.stack([train_loss, val_loss], 1), best_losses)
        best_epoch = torch.where(improved, epoch, best_epoch)
        since_best = torch.where(reset, 0, since_best + 1)
        if best_state is not None and bool(improved.any()):
            with torch.no_grad():
                for b, p in zip(best_state, replicas.params):
                    b.copy_(torch.where(improved.view(-1, *([1] * (p.dim() - 1))), p, b))
        # loss_threshold = 0 is no loss stop: float32 cross-entropy reaches exactly 0.0 on confident models
        converged = live & (train_loss <= cfg.loss_threshold) if cfg.loss_threshold > 0 else torch.zeros_like(live)
        stopping = bad | converged
        if cfg.patience:
            impatient = live & (since_best >= cfg.patience)
            stopping = stopping | impatient
        if epoch == cfg.epochs:
            stopping = stopping | live
        stop_epoch = torch.where(stopping, epoch, stop_epoch)
        newly = stopping.tolist()
        if any(newly):
            flags = (bad.tolist(), converged.tolist(), impatient.tolist() if cfg.patience else [False] * R)
            for r in range(R):
                if newly[r]:
                    reason[r] = ("diverged" if flags[0][r] else "converged" if flags[1][r]
                                 else "patience" if flags[2][r] else "max_epochs")
                    running[r] = False
            active = active & ~stopping
        epochs_done = epoch
        if progress is not None:
            progress(1)
        if callbacks:
            state = _epoch_state(epoch, replicas, view, grads, scores, train_loss, val_loss, active, labels, scratch)
            for cb in callbacks:
                cb.on_epoch_end(state)
        if not any(running):
            break
        if scheduler is not None and epoch >= 1:  # the lr of step epoch + 1, from state epoch's val loss
            scheduler.step(val_loss, active)

        # ---- train one epoch
        if transductive:
            assert grads is not None
            step(grads, active)
        else:
            total = torch.zeros(R, dtype=torch.float64, device=device)
            count = 0
            for batch in view.batches("train", shuffle=True):
                out, y = view.run(replicas, batch, train=True)
                loss = loss_fn(out, y)
                g = torch.autograd.grad(loss.sum(), replicas.params)
                step(g, active & torch.isfinite(loss))
                total += loss.detach().to(torch.float64)
                count += 1
            last_pass_loss = total / max(count, 1)
        if checkpoint is not None and checkpoint.due(epoch):
            checkpoint.save({
                "next_epoch": epoch + 1, "elapsed_s": time.perf_counter() - start,
                "params": [p.detach() for p in replicas.params], "optimizer": tensor_state(opt),
                "buffers": {n: b.detach() for n, b in replicas.buffers.items()},
                "scheduler": tensor_state(scheduler) if scheduler is not None else None,
                "replica_rng": generator_states(replicas.rng),
                "batch_rng": view.generator.get_state() if getattr(view, "generator", None) is not None else None,
                "torch_rng": torch.get_rng_state(),
                "loop": {"active": active, "best_val": best_val, "best_other": best_other,
                         "best_metrics": best_metrics, "best_losses": best_losses, "best_epoch": best_epoch,
                         "since_best": since_best, "diverged_epoch": diverged_epoch, "stop_epoch": stop_epoch},
                "reason": reason, "running": running, "last_pass_loss": last_pass_loss, "best_state": best_state})

    if callbacks:
        for cb in callbacks:
            if callable(getattr(cb, "on_fit_end", None)):
                cb.on_fit_end(state)
    elapsed = time.perf_counter() - start
    per_epoch = elapsed / max(epochs_done + 1, 1)
    n_params = replicas.num_parameters()
    be, de, se = best_epoch.tolist(), diverged_epoch.tolist(), stop_epoch.tolist()
    bm, bl = best_metrics.tolist(), best_losses.tolist()
    results = []
    for r in range(R):
        has_best = be[r] >= 0
        metrics = {s: (bm[r][i] if has_best and math.isfinite(bm[r][i]) else None) for i, s in enumerate(SPLITS)}
        results.append(RunResult(
            metrics=metrics,
            val_loss=bl[r][1] if has_best and math.isfinite(bl[r][1]) else None,
            train_loss=bl[r][0] if has_best and math.isfinite(bl[r][0]) else None,
            best_epoch=be[r] if has_best else None,
            epochs_run=se[r] if se[r] >= 0 else epochs_done,
            stop_reason=reason[r] or "max_epochs",
            diverged=de[r] >= 0,
            diverged_epoch=de[r] if de[r] >= 0 else None,
            wall_time_s=elapsed,
            time_per_epoch_s=per_epoch,
            num_parameters=n_params,
            best_state=replicas.state_of(r, best_state) if best_state is not None else None,
            # the learning rate of the replica's last optimisation step (scheduled runs only)
            extra={**({"last_step_lr": float(scheduler.lr[r])} if scheduler is not None else {}),
                   **({"resumed_at_epoch": first_epoch, "resumed_elapsed_s": resumed_s} if first_epoch else {})},
        ))
    return results
