"""What the training loop sees of a task: its inputs, per-split targets, the loss and the metric.

:class:`TransductiveView`: one graph with a mask per split, one full-batch step per epoch.
:class:`GraphListView`: inductive node tasks and graph tasks, mini-batches of graphs in an order
fixed by ``data_seed`` and shared by all replicas.  Both give ``(R, ...)`` outputs of every
replica (a :class:`~zoo.trainer.replicas.Replicas`) with the targets they are scored against.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Batch

from zoo.trainer.config import SPLITS

def loss_function(task: Any) -> Tuple[Callable[[Tensor, Tensor], Tensor], bool]:
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


def plain_accuracy(task: Any) -> bool:
    """Whether the task's metric is plain single-label accuracy (vectorised over replicas)."""
    return task.metric == "accuracy" and not getattr(task, "ogb_evaluator", None) and not task.multilabel


def score(task: Any, logits: Tensor, y: Tensor) -> Tensor:
    """``(R,)`` task metric of every replica (vectorised for plain accuracy)."""
    if plain_accuracy(task):
        return (logits.argmax(-1) == y.unsqueeze(0)).to(torch.float64).mean(-1)
    out = []
    for r in range(logits.size(0)):
        try:
            out.append(task.evaluate(logits[r], y))
        except ValueError:  # e.g. ROC-AUC with one class present
            out.append(float("nan"))
    return torch.tensor(out, dtype=torch.float64, device=logits.device)


class TransductiveView:
    """One graph, masks per split; one full-batch step per epoch."""

    def __init__(self, task: Any, device: torch.device, dtype: torch.dtype, edge_features: bool = False) -> None:
        d = task.data
        self.x = d.x.to(device=device, dtype=dtype)
        self.edge_index = d.edge_index.to(device)
        self.edge_attr: Optional[Tensor] = None
        if edge_features:  # a model with an edge encoder reads the graph's edge_attr every step
            if getattr(d, "edge_attr", None) is None:
                raise ValueError(f"{task.name}: the model has an edge encoder but the graph has no edge_attr; "
                                 "set data.edge_attr (one row per edge) or build the model without edge_encoder")
            self.edge_attr = d.edge_attr.to(device)
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
        self.plain_accuracy = plain_accuracy(task)
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
        """The model's positional arguments: ``(edge_index, x)``, and with edge features
        ``(edge_index, x, False, edge_attr)`` (``DeepGNN.forward``'s ``return_attention``, ``edge_attr``)."""
        if self.edge_attr is None:
            return (self.edge_index, self.x)
        return (self.edge_index, self.x, False, self.edge_attr)

    def dry_run(self, model: nn.Module) -> None:
        with torch.no_grad():
            model(*self.inputs())


class GraphListView:
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

    def run(self, replicas: Any, batch: Any, train: bool,
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
