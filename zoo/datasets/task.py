"""The task object returned by :func:`zoo.datasets.load`.

A :class:`Task` bundles the graph(s), the chosen split, the task kind and its metric, and a
record of every preprocessing step, so results can be reported with their provenance.

Kinds:

* ``"transductive"``: one graph in ``data`` with 1-D bool ``train_mask``/``val_mask``/``test_mask``.
* ``"inductive"``: node classification on separate graphs, ``graphs = {"train", "val", "test"}``.
  A graph may carry a 1-D bool ``label_mask``: only those nodes are labelled (e.g. TREES,
  where only the root is); without it every node is labelled.
* ``"graph"``: graph classification, ``graphs`` as above, one label row per graph.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .checks import check_task, mask_from_index  # noqa: F401  (re-exported for the loaders)
from .fingerprint import Seal, task_fingerprint
from .user import task_from_data

KINDS = ("transductive", "inductive", "graph")
METRICS = ("accuracy", "micro_f1", "rocauc")


@dataclass
class Task:
    name: str
    kind: str
    metric: str
    num_features: int
    num_classes: int
    multilabel: bool
    data: Optional[Any] = None
    graphs: Optional[Dict[str, Sequence[Any]]] = None
    split: Union[int, str, None] = None
    preprocessing: Tuple[str, ...] = ()
    source: str = ""
    ogb_evaluator: Optional[str] = field(default=None, repr=False)  # OGB name whose Evaluator scores
    #: How the task was made, as suite task keys (``dataset``, ``split``, ``data_seed``, ``transforms``,
    #: ``options``): set by :func:`zoo.datasets.load`.  ``None`` for a task built from a user's data,
    #: which :meth:`fingerprint` describes instead.  ``undescribed`` names what could not be recorded.
    provenance: Optional[Dict[str, Any]] = field(default=None, repr=False)
    #: The objects :func:`zoo.datasets.load` made (:class:`zoo.datasets.fingerprint.Seal`): while intact, the
    #: data is the recipe's and ``provenance`` identifies it; once edited, :meth:`fingerprint` does.
    seal: Optional[Any] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Task.kind must be one of {KINDS}, got {self.kind!r}")
        if self.metric not in METRICS:
            raise ValueError(f"Task.metric must be one of {METRICS}, got {self.metric!r}")
        if (self.data is None) == (self.graphs is None):
            raise ValueError("a Task holds either `data` (transductive) or `graphs` (inductive/graph), not both")
        check_task(self)

    @classmethod
    def from_data(cls, data: Any, *, name: str = "my_graph", num_classes: Optional[int] = None,
                  split: Optional[Tuple[float, float]] = None, seed: int = 0, metric: str = "accuracy",
                  multilabel: bool = False) -> "Task":
        """A node-classification task on one graph of the user's: a PyG ``Data`` or a ``dgl.DGLGraph``.

        The graph carries features ``x`` and labels ``y`` (DGL: ``ndata["feat"]`` / ``ndata["label"]``)
        and either bool ``train_mask`` / ``val_mask`` / ``test_mask`` (index tensors are turned into
        masks) or ``split=(train_ratio, val_ratio)``: a random partition drawn from ``seed``, the rest
        being test.  ``num_classes`` defaults to the largest label + 1.  Labels and masks are checked
        here (one line per problem); :meth:`fingerprint` identifies the data in a cell's id.
        """
        return task_from_data(cls, data, name=name, num_classes=num_classes, split=split, seed=seed,
                              metric=metric, multilabel=multilabel)

    def fingerprint(self) -> str:
        """A hash of the task's content (graph tensors, splits, classes, metric): equal data, equal
        fingerprint.  Computed from the data as it is now; each tensor's hash is kept until the tensor
        changes (:mod:`zoo.datasets.fingerprint`), so asking again is cheap."""
        return task_fingerprint(self)

    def as_made(self) -> bool:
        """Whether the task holds the data :func:`zoo.datasets.load` made for its recipe (no tensor
        replaced or changed in place since, or only by equal ones).  ``False`` for a task not made by
        ``load``."""
        if self.seal is None:
            return False
        if self.seal.intact(self):
            return True
        if self.seal.reload is None:  # a copy whose recipe could not travel with it: cannot tell
            return False
        if self.fingerprint() != self.seal.reload().fingerprint():
            return False
        self.seal = Seal(self, self.seal.reload)  # equal data: sealed again as it is now
        return True

    def __repr__(self) -> str:
        """A summary, not the data: the dataclass repr of ogbg-molhiv's 41k graphs is 2.7 MB."""
        if self.data is not None:
            n, e = getattr(self.data, "num_nodes", None), getattr(self.data, "num_edges", None)
            held = f"data=<graph: {n} nodes, {e} edges>"
        else:
            sizes = ", ".join(f"{k}: {len(v)}" for k, v in (self.graphs or {}).items())
            held = f"graphs=<{sizes or 'none'}>"
        return (f"Task(name={self.name!r}, kind={self.kind!r}, metric={self.metric!r}, "
                f"num_features={self.num_features}, num_classes={self.num_classes}, multilabel={self.multilabel}, "
                f"{held}, split={self.split!r}, preprocessing={self.preprocessing!r}, source={self.source!r})")

    # ------------------------------------------------------------------ scoring
    def evaluate(self, logits_or_scores: Tensor, y: Tensor) -> float:
        """The task metric in [0, 1] for predictions on the rows of ``y``.

        * ``accuracy``: argmax of ``[n, C]`` logits (or ``[n]`` predicted classes) against ``y``.
        * ``micro_f1`` (multi-label): labels predicted where the logit is > 0 (sigmoid > 0.5).
        * ``rocauc``: per-task ROC-AUC averaged over tasks (OGB's Evaluator for OGB data);
          single-task binary problems accept ``[n, 1]`` scores or ``[n, 2]`` logits.
        """
        pred = logits_or_scores.detach().cpu()
        y = y.detach().cpu()
        if pred.size(0) != y.size(0):
            raise ValueError(f"{self.name}: got {pred.size(0)} predictions for {y.size(0)} labels")
        if pred.is_floating_point() and not bool(torch.isfinite(pred).all()):
            # argmax of NaN rows picks index 0 and ROC-AUC ranks NaN arbitrarily: a number that means nothing.
            count = int((~torch.isfinite(pred)).sum())
            raise ValueError(f"{self.name}: the predictions contain {count} NaN/inf value(s); the model diverged "
                             "or got non-finite inputs (lower the learning rate, check the data)")
        if self.metric == "accuracy":
            classes = pred.argmax(-1) if pred.dim() > 1 and pred.size(-1) > 1 else pred.view(-1).long()
            if self.ogb_evaluator:
                return self._ogb({"y_true": y.view(-1, 1), "y_pred": classes.view(-1, 1)}, "acc")
            if y.numel() == 0:
                raise ValueError(f"{self.name}: cannot score zero labels")
            return float((classes == y.view(-1)).float().mean())
        if self.metric == "micro_f1":
            from sklearn.metrics import f1_score

            return float(f1_score(y.numpy(), (pred > 0).long().numpy(), average="micro", zero_division=0))
        # rocauc
        if pred.dim() == 1:
            pred = pred.view(-1, 1)
        if pred.size(-1) == 2 and (y.dim() == 1 or y.size(-1) == 1):
            pred = (pred[:, 1] - pred[:, 0]).view(-1, 1)  # binary logits -> a monotone score
        y = y.view(pred.size(0), -1)
        if self.ogb_evaluator:
            return self._ogb({"y_true": y, "y_pred": pred.float()}, "rocauc")
        from sklearn.metrics import roc_auc_score

        scores = [roc_auc_score(y[:, t].numpy(), pred[:, t].numpy())
                  for t in range(y.size(1)) if 0 < int(y[:, t].sum()) < y.size(0)]
        if not scores:
            raise ValueError(f"{self.name}: ROC-AUC needs both classes present in some task")
        return float(sum(scores) / len(scores))

    def _ogb(self, input_dict: Dict[str, Tensor], key: str) -> float:
        prefix = self.ogb_evaluator.split("-")[0]
        from zoo._ogb import ogb_module

        evaluator = ogb_module("ogb.graphproppred" if prefix == "ogbg" else "ogb.nodeproppred").Evaluator
        return float(evaluator(self.ogb_evaluator).eval(input_dict)[key])

    # ------------------------------------------------------------------ summary
    def split_sizes(self) -> Dict[str, int]:
        """Labelled nodes (transductive / inductive) or graphs (graph) per split."""
        if self.data is not None:
            return {s: int(getattr(self.data, f"{s}_mask").sum()) for s in ("train", "val", "test")}
        assert self.graphs is not None
        if self.kind == "graph":
            return {s: len(g) for s, g in self.graphs.items()}
        sizes = {}
        for s, graphs in self.graphs.items():
            if hasattr(graphs, "num_labelled"):  # lazily generated graphs know it without building them
                sizes[s] = int(graphs.num_labelled())
                continue
            total = 0
            for g in graphs:
                mask = getattr(g, "label_mask", None)
                total += int(mask.sum()) if mask is not None else int(g.num_nodes)
            sizes[s] = total
        return sizes

    def describe(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "name": self.name, "kind": self.kind, "metric": self.metric,
            "num_features": self.num_features, "num_classes": self.num_classes,
            "multilabel": self.multilabel,
            "split": self.split, "preprocessing": list(self.preprocessing), "source": self.source,
        }
        if self.data is not None:
            out["num_nodes"] = int(self.data.num_nodes)
            out["num_edges"] = int(self.data.num_edges)
        else:
            assert self.graphs is not None
            out["num_graphs"] = {s: len(g) for s, g in self.graphs.items()}
        out["split_sizes"] = self.split_sizes()
        return out

