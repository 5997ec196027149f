"""Labels and masks checked once, when a :class:`~zoo.datasets.task.Task` is made.

A label outside ``[0, num_classes)`` in the validation or test rows is otherwise scored without a
word (``argmax == -1`` is simply never true), and one in the training rows reaches
``cross_entropy`` as torch's raw ``IndexError``.  Each problem is one ``ValueError`` line naming the
split, the count, an example and the fix.
"""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

SPLITS = ("train", "val", "test")


def mask_from_index(index: Tensor, num_nodes: int) -> Tensor:
    """A bool mask of ``num_nodes`` entries, True at ``index``."""
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[index] = True
    return mask


def check_mask(name: str, split: str, mask: Any, num_nodes: int) -> None:
    """``mask`` is a 1-D bool tensor with one entry per node."""
    if not isinstance(mask, Tensor):
        raise ValueError(f"{name}: {split}_mask is missing (got {type(mask).__name__}); set data.{split}_mask to a "
                         f"bool tensor of {num_nodes} entries, or pass split=(train_ratio, val_ratio)")
    if mask.dtype != torch.bool:
        hint = ("an index tensor? use zoo.datasets.task.mask_from_index(index, num_nodes)"
                if not mask.is_floating_point() and mask.numel() != num_nodes else f"use {split}_mask.bool()")
        raise ValueError(f"{name}: {split}_mask must be a bool tensor, got dtype {mask.dtype} with "
                         f"{mask.numel()} entries ({hint})")
    if mask.dim() != 1 or mask.numel() != num_nodes:
        raise ValueError(f"{name}: {split}_mask has shape {tuple(mask.shape)}; it must be ({num_nodes},), one entry "
                         "per node")
    if not bool(mask.any()):
        raise ValueError(f"{name}: {split}_mask selects no node; every split needs at least one labelled node")


def check_labels(name: str, split: str, y: Any, rows: Optional[Tensor], num_classes: int,
                 multilabel: bool, metric: str) -> None:
    """The labels of one split: dtype, shape and (class labels) range."""
    if not isinstance(y, Tensor):
        raise ValueError(f"{name}: the graph has no labels (y is {type(y).__name__}); set data.y")
    if multilabel or metric == "rocauc":
        if y.is_floating_point() and not bool(torch.isfinite(y if rows is None else y[rows]).all()):
            raise ValueError(f"{name}: {split} labels contain NaN/inf; drop those rows from the {split} split")
        return
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"{name}: class labels must be integers, got y of dtype {y.dtype} (use y.long())")
    if y.dim() != 1:
        raise ValueError(f"{name}: class labels y must have shape (num_nodes,), got {tuple(y.shape)} "
                         "(for (N, 1) use y.view(-1); for several labels per node set multilabel=True)")
    chosen = y if rows is None else y[rows]
    bad = (chosen < 0) | (chosen >= num_classes)
    if bool(bad.any()):
        example = int(chosen[bad][0])
        raise ValueError(f"{name}: {int(bad.sum())} {split} label(s) outside [0, {num_classes}) (e.g. {example}); "
                         f"fix y, drop those nodes from the {split} split, or set num_classes")


def check_transductive(task: Any) -> None:
    """Masks and labels of a one-graph task, per split."""
    data = task.data
    num_nodes = int(data.num_nodes)
    y = getattr(data, "y", None)
    if isinstance(y, Tensor) and y.size(0) != num_nodes:
        raise ValueError(f"{task.name}: y has {y.size(0)} rows for {num_nodes} nodes")
    for split in SPLITS:
        mask = getattr(data, f"{split}_mask", None)
        check_mask(task.name, split, mask, num_nodes)
        check_labels(task.name, split, y, mask, task.num_classes, task.multilabel,
                     task.metric)


def check_graphs(task: Any) -> None:
    """Labels of separate graphs, per split (lazily generated graph sets are checked when built)."""
    assert task.graphs is not None
    for split, graphs in task.graphs.items():
        if not isinstance(graphs, (list, tuple)) or (task.multilabel or task.metric == "rocauc"):
            continue
        for g in graphs:
            mask = getattr(g, "label_mask", None) if task.kind == "inductive" else None
            check_labels(task.name, split, getattr(g, "y", None), mask, task.num_classes, False, task.metric)


def check_features(task: Any) -> None:
    """A one-graph task's ``num_features`` is its ``x``'s width (an edited task may have replaced ``x``)."""
    x = getattr(task.data, "x", None) if task.data is not None else None
    if isinstance(x, Tensor) and x.dim() == 2 and x.size(1) != task.num_features:
        raise ValueError(f"{task.name}: x has {x.size(1)} features but the task says num_features="
                         f"{task.num_features}; set task.num_features = {x.size(1)}")


def check_task(task: Any) -> None:
    """Every check of ``task``'s labels and masks; the first problem raises ``ValueError``."""
    if isinstance(task.num_classes, bool) or not isinstance(task.num_classes, int) or task.num_classes < 1:
        raise ValueError(f"{task.name}: num_classes must be an integer >= 1, got {task.num_classes!r}")
    if task.data is not None:
        check_transductive(task)
    else:
        check_graphs(task)
