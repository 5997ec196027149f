"""Resolved cells -> a training run: the one adapter under both ``zoo.fit`` and ``zoo bench``.

A *cell configuration* is the resolved table a suite cell holds and its record stores
(``{"task": ..., "model": ..., "train": ..., "run": ...}``, :mod:`zoo.bench.suite.schema`); this
layer reads it as plain data and imports nothing from ``zoo.bench``.  Every step from a group of
such configurations to trained replicas is made here, once: the task (:class:`TaskCache`), the
device (:func:`resolve_device`), the models (:func:`model_factory`, with :func:`output_size`), the
:class:`~zoo.trainer.config.TrainConfig` (:func:`train_config`), the dtype, the seeds, the stacked
replicas (:func:`start_group`) and the training with the callbacks the cells ask for
(:meth:`GroupRun.train`).  ``zoo.fit`` (:mod:`zoo.fitting`) and the runner
(:func:`zoo.bench.run.driver.run_group`) both call :func:`start_group`, so the same cells give the
same numbers by construction.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch import nn

from zoo._gc import end_startup
from zoo.build import build as build_model
from zoo.datasets import load
from zoo.nn.readout import GraphPool
from zoo.rescale import DynamicRescaling
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import Replicas, build_replicas
from zoo.trainer.results import RunResult
from zoo.trainer.resume import ResumeFile

__all__ = ["TaskCache", "resolve_device", "output_size", "model_factory", "train_config", "build_config",
           "training_callbacks", "GroupRun", "start_group"]

Config = Mapping[str, Any]


def resolve_device(device: Optional[str]) -> torch.device:
    """``None``/"auto" -> cuda if available else cpu; "cuda"/"cuda:1"/"cpu" as given (checked)."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):  # torch's own message lists twenty device types
        raise ValueError(f"unknown device {device!r}; use cpu, cuda or cuda:N (e.g. cuda:1)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here; use device='cpu' "
                         "(CLI: --device cpu)")
    return dev


class TaskCache:
    """Load each distinct (dataset, split, transforms, options, data_seed) once per run
    (``max_items`` keeps only the most recent ones: long-lived workers)."""

    def __init__(self, root: Optional[Union[str, Path]] = None, max_items: Optional[int] = None) -> None:
        self.root = root
        self.max_items = max_items
        self._tasks: Dict[str, Any] = {}

    def get(self, task_cfg: Mapping[str, Any]) -> Any:
        """The task of a cell configuration's ``"task"`` table."""
        key = json.dumps(task_cfg, sort_keys=True, default=str)
        if key not in self._tasks:
            transforms = [t if isinstance(t, str) else (t[0], t[1]) for t in task_cfg["transforms"]]
            if self.max_items is not None and len(self._tasks) >= self.max_items:
                self._tasks.pop(next(iter(self._tasks)))
            self._tasks[key] = load(task_cfg["dataset"], root=self.root, split=task_cfg["split"],
                                    transforms=transforms, seed=task_cfg["data_seed"], **task_cfg["options"])
        return self._tasks[key]


def output_size(task: Any) -> int:
    """Logits per row: classes, or the width of the target matrix for multi-label / ROC-AUC tasks
    (one logit for a binary ROC-AUC task with class labels, such as minesweeper: the trainer's
    ROC-AUC loss is binary cross-entropy against the label column)."""
    y = task.data.y if task.data is not None else task.graphs["train"][0].y
    if (task.multilabel or task.metric == "rocauc") and y.dim() == 2:
        return int(y.size(1))
    if task.metric == "rocauc" and y.dim() == 1 and int(task.num_classes) == 2:
        return 1
    return int(task.num_classes)


def _build(m: Config, in_dim: int, out_dim: int) -> nn.Module:
    return build_model(m["name"], in_dim=in_dim, out_dim=out_dim, init=m["init"],
                       init_kwargs=m["init_kwargs"] or None, norm=m["norm"], norm_kwargs=m["norm_kwargs"] or None,
                       **m["kwargs"])


def model_factory(config: Config, task: Any) -> Callable[[], nn.Module]:
    """A zero-argument builder of the configuration's model for ``task`` (seeded by the caller).

    Graph tasks: the GNN maps to ``hidden_dim`` features per node, then :class:`~zoo.nn.readout.GraphPool`
    (readout ``m["readout"]``, default ``mean``, and a 2-layer MLP) gives one output per graph.
    """
    m = config["model"]
    if m.get("readout") is not None and task.kind != "graph":
        raise ValueError(f"readout={m['readout']!r} pools node outputs into graph outputs, but {task.name} is a "
                         f"{task.kind} (node-level) task; remove readout from the suite cell")

    def build() -> nn.Module:
        if task.kind != "graph":
            return _build(m, task.num_features, output_size(task))
        pooled = int(m["kwargs"].get("hidden_dim", 64))
        gnn = _build(m, task.num_features, pooled)
        if getattr(gnn, "graph_tied", False):
            raise ValueError(f"{m['name']} learns parameters tied to one graph (per-edge / per-node biases); "
                             f"{task.name} is a graph task with many graphs: use gatv2, gat or gcn")
        return GraphPool(gnn, pooled, output_size(task), readout=m.get("readout") or "mean")

    return build


def build_config(config: Config, task: Any) -> Dict[str, Any]:
    """What ``zoo.build`` was called with for the configuration's model on ``task`` (a record's
    ``build_config``; ``zoo.load`` rebuilds the model from it)."""
    m = config["model"]
    return {"name": m["name"], "in_dim": task.num_features, "out_dim": output_size(task), "norm": m["norm"],
            "norm_kwargs": m["norm_kwargs"], "init_kwargs": m["init_kwargs"], **m["kwargs"], "init": m["init"]}


def train_config(config: Config, **runtime: Any) -> TrainConfig:
    """The configuration's :class:`TrainConfig`; ``runtime``: its fields that are no cell keys
    (``cuda_graphs``, ``check_every``: no number depends on them; ``keep_best_state``: copies of the
    selected states, switched on by ``prune_layers`` too)."""
    t = dict(config["train"])
    t["betas"] = tuple(t["betas"])
    t["data_seed"] = config["task"]["data_seed"]
    t.update({k: v for k, v in runtime.items() if v is not None})
    if config["run"].get("prune_layers"):
        t["keep_best_state"] = True
    return TrainConfig(**t)


def training_callbacks(configs: Sequence[Config]) -> List[Any]:
    """The training plugins a group's cells ask for: ``rescale = "<criterion>"`` adds
    :class:`zoo.rescale.DynamicRescaling` with the authors' schedule."""
    criterion = configs[0]["run"].get("rescale")
    if not criterion:
        return []
    return [DynamicRescaling(criterion=criterion)]


@dataclass
class GroupRun:
    """A group of cells made ready to train: its replicas (built, seeded, stacked), the task's view
    and the :class:`TrainConfig`; ``started``: when the building began (the group's wall time), and
    ``cpu_started``: this process's CPU time then (:func:`time.process_time`: every thread's user +
    system time, so torch's intra-op threads count too)."""

    configs: List[Config]
    task: Any
    replicas: Replicas
    view: Any
    cfg: TrainConfig
    seeds: List[int]
    started: float
    cpu_started: float = 0.0

    def train(self, callbacks: Sequence[Any] = (), labels: Optional[Sequence[str]] = None,
              resume: Optional[ResumeFile] = None) -> List[RunResult]:
        """Train the replicas (:func:`~zoo.trainer.loop.train_replicas`) with the cells' own training
        plugins (:func:`training_callbacks`) first, then ``callbacks``."""
        return train_replicas(self.task, self.replicas, self.view, self.cfg, self.seeds,
                              callbacks=[*training_callbacks(self.configs), *callbacks], labels=labels, resume=resume)


def start_group(configs: Sequence[Config], task: Any, device: torch.device, *, stacked: bool = True,
                factories: Optional[Sequence[Callable[[], nn.Module]]] = None, trains: bool = True,
                **runtime: Any) -> GroupRun:
    """Build the replicas of one group of cell configurations (the same group: they differ only in
    seed and init) on ``device``, in the cells' dtype; replica ``r`` is seeded by its cell's seed
    alone.  ``factories`` replaces the cells' models (``zoo.fit`` from given weights); ``trains=False``:
    a group that is only measured (no dry run unless a parameter is lazy: ``build_replicas``);
    ``runtime``: :func:`train_config`'s fields that are no cell keys."""
    end_startup()  # the process's start-up is over: the collector back on (zoo._gc)
    configs = list(configs)
    cfg = train_config(configs[0], **runtime)
    dtype = getattr(torch, configs[0]["run"]["dtype"])
    builders = list(factories) if factories is not None else [model_factory(c, task) for c in configs]
    seeds = [int(c["run"]["seed"]) for c in configs]
    started, cpu_started = time.perf_counter(), time.process_time()
    replicas, view = build_replicas(task, builders, seeds, device, dtype, cfg, stacked, dry_run=trains)
    return GroupRun(configs, task, replicas, view, cfg, seeds, started, cpu_started)

