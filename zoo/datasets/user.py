"""A user's own graph as a :class:`~zoo.datasets.task.Task` (``Task.from_data``).

A registered dataset is described by how it was loaded (name, split, seed, transforms, options);
a user's graph has no such recipe, so its content is hashed instead
(:func:`zoo.datasets.fingerprint.task_fingerprint`): two tasks with equal tensors, splits, classes
and metric get one fingerprint, any other difference another.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from .._dgl import check_dgl_supported, is_dgl_graph
from .checks import SPLITS
from .splits import ratio_split
from .checks import mask_from_index

#: DGL ``ndata`` names read as PyG's (the first present wins)
_DGL_NAMES = {"x": ("feat", "x", "features"), "y": ("label", "y", "labels")}


def _dgl_to_data(graph: Any) -> Data:
    check_dgl_supported(graph)
    src, dst = graph.edges(order="eid")
    out = Data(edge_index=torch.stack([src, dst]).long(), num_nodes=int(graph.num_nodes()))
    ndata = graph.ndata
    for key, names in _DGL_NAMES.items():
        found = next((n for n in names if n in ndata), None)
        if found is None:
            raise ValueError(f"the DGL graph has no g.ndata[{names[0]!r}] (nor {', '.join(map(repr, names[1:]))}); "
                             f"it has {', '.join(map(repr, sorted(map(str, ndata.keys())))) or 'no node data'}")
        out[key] = ndata[found]
    for split in SPLITS:
        if f"{split}_mask" in ndata:
            out[f"{split}_mask"] = ndata[f"{split}_mask"]
    names = sorted(str(k) for k in graph.edata.keys())
    if len(names) == 1:
        out.edge_attr = graph.edata[names[0]]
    return out


def _as_data(data: Any) -> Data:
    if is_dgl_graph(data):
        return _dgl_to_data(data)
    if isinstance(data, Data):
        return data.clone()
    raise TypeError(f"Task.from_data takes a torch_geometric.data.Data or a dgl.DGLGraph, got {type(data).__name__}")


def _masks(data: Data, split: Optional[Tuple[float, float]], seed: int) -> None:
    """Bool masks on ``data``: drawn from ``split`` ratios, or the data's own (index tensors converted)."""
    n = int(data.num_nodes)
    if split is not None:
        if not (isinstance(split, (tuple, list)) and len(split) == 2):
            raise ValueError(f"split must be (train_ratio, val_ratio), e.g. (0.6, 0.2); got {split!r}")
        data.train_mask, data.val_mask, data.test_mask = ratio_split(n, seed, float(split[0]), float(split[1]))
        return
    missing = [s for s in SPLITS if getattr(data, f"{s}_mask", None) is None]
    if missing:
        raise ValueError(f"the graph has no {', '.join(f'{s}_mask' for s in missing)}: set the masks on the data, "
                         "or pass split=(train_ratio, val_ratio) to draw a random split (the rest is test)")
    for s in SPLITS:
        mask = getattr(data, f"{s}_mask")
        if isinstance(mask, Tensor) and mask.dtype in (torch.int64, torch.int32) and mask.dim() == 1 \
                and (mask.numel() != n or bool((mask > 1).any())):
            data[f"{s}_mask"] = mask_from_index(mask.long(), n)  # node indices, not a 0/1 mask


def task_from_data(cls: Any, data: Any, *, name: str, num_classes: Optional[int], split: Any, seed: int,
                   metric: str, multilabel: bool) -> Any:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    data = _as_data(data)
    if getattr(data, "x", None) is None:
        raise ValueError("the graph has no node features: set data.x (DGL: g.ndata['feat']), e.g. a one-hot "
                         "identity torch.eye(num_nodes) when the graph has none")
    y = getattr(data, "y", None)
    if isinstance(y, Tensor) and not multilabel and y.dim() == 2 and y.size(1) == 1:
        data.y = y.view(-1)  # (N, 1) class labels, OGB's layout
    _masks(data, split, seed)
    if num_classes is None and isinstance(data.y, Tensor) and not multilabel:
        masks = [getattr(data, f"{s}_mask") for s in SPLITS]
        labelled = torch.stack(masks).any(0) if all(m.dtype == torch.bool and m.shape == masks[0].shape
                                                     for m in masks) else slice(None)
        num_classes = int(data.y[labelled].max()) + 1 if data.y.numel() and not data.y.is_floating_point() else 0
    elif num_classes is None and isinstance(data.y, Tensor):
        num_classes = int(data.y.size(-1))
    label = "masks" if split is None else f"random_ratio={split[0]}/{split[1]}:seed={seed}"
    return cls(name=name, kind="transductive", metric=metric, num_features=int(data.x.size(-1)),
               num_classes=num_classes, multilabel=multilabel, data=data, split=label,
               source="user data (Task.from_data)")
