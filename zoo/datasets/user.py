"""A user's own graph as a :class:`~zoo.datasets.task.Task` (``Task.from_data``).

A registered dataset is described by how it was loaded (name, split, seed, transforms, options);
a user's graph has no such recipe, so its content is hashed instead
(:func:`zoo.datasets.fingerprint.task_fingerprint`): two tasks with equal tensors, splits, classes
and metric get one fingerprint, any other difference another.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from .._dgl import check_dgl_supported, is_dgl_graph
from .checks import SPLITS, mask_from_index
from .splits import ratio_split

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


def _scipy_edges(matrix: Any) -> Tensor:
    """A scipy sparse adjacency matrix as ``edge_index``; weighted entries are refused (not dropped)."""
    coo = matrix.tocoo()
    if coo.shape[0] != coo.shape[1]:
        raise ValueError(f"edge_index is a scipy sparse matrix of shape {coo.shape}; an adjacency matrix is square "
                         "(num_nodes, num_nodes), or pass edge_index as a (2, num_edges) tensor")
    if coo.nnz and not (coo.data == 1).all():
        raise ValueError("edge_index is a weighted scipy sparse matrix; the zoo's models read no edge weights, so "
                         "they would be dropped: pass the structure, edge_index = "
                         "torch_geometric.utils.from_scipy_sparse_matrix(A)[0]")
    return torch.stack([torch.as_tensor(coo.row, dtype=torch.long), torch.as_tensor(coo.col, dtype=torch.long)])


def _tensor(key: str, value: Any) -> Any:
    """numpy arrays and scipy sparse matrices as tensors (the rest as given)."""
    if hasattr(value, "tocoo") and hasattr(value, "nnz"):  # scipy.sparse, without importing scipy
        if key == "edge_index":
            return _scipy_edges(value)
        return torch.as_tensor(value.toarray())
    if type(value).__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "shape"):
        if value.dtype == object:
            raise ValueError(f"data.{key} is a numpy array of Python objects; give numbers "
                             f"(e.g. numpy.asarray(..., dtype=float)) or a tensor")
        tensor = torch.as_tensor(value.copy())  # a copy: numpy's memory may be changed later
        return tensor.long() if key == "edge_index" else tensor
    return value


def _as_data(data: Any) -> Data:
    if is_dgl_graph(data):
        out = _dgl_to_data(data)
    elif isinstance(data, Data):
        out = data.clone()
    else:
        raise TypeError(f"Task.from_data takes a torch_geometric.data.Data or a dgl.DGLGraph, got "
                        f"{type(data).__name__}")
    for key in list(out.keys()):
        out[key] = _tensor(key, out[key])
    return out


def _check_ratios(split: Any) -> Tuple[float, float]:
    if not (isinstance(split, (tuple, list)) and len(split) == 2
            and all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in split)):
        raise ValueError(f"split must be (train_ratio, val_ratio), e.g. (0.6, 0.2); got {split!r}")
    train, val = float(split[0]), float(split[1])
    if train <= 0 or val <= 0 or train + val >= 1:
        raise ValueError(f"split={tuple(split)!r} leaves no node for {'test' if train + val >= 1 else 'training or validation'}: "
                         "give 0 < train_ratio, 0 < val_ratio and train_ratio + val_ratio < 1 (the rest is test), "
                         "e.g. (0.6, 0.2)")
    return train, val


def _index_mask(split: str, index: Tensor, n: int) -> Tensor:
    """Node indices as a bool mask; an index outside ``[0, n)`` is an error, not a wrap-around."""
    bad = (index < 0) | (index >= n)
    if bool(bad.any()):
        raise ValueError(f"{split}_mask holds node index {int(index[bad][0])}, outside 0..{n - 1} (the graph has {n} "
                         "nodes); give node indices in that range, or a bool mask of one entry per node")
    return mask_from_index(index.long(), n)


def _check_disjoint(data: Data) -> None:
    masks = {s: getattr(data, f"{s}_mask") for s in SPLITS}
    if not all(isinstance(m, Tensor) and m.dtype == torch.bool and m.shape == masks["train"].shape
               for m in masks.values()):
        return  # Task's own checks name the problem
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        shared = masks[a] & masks[b]
        if bool(shared.any()):
            raise ValueError(f"{a}_mask and {b}_mask share {int(shared.sum())} node(s) (e.g. node "
                             f"{int(shared.nonzero()[0])}): a node scored in one split must not be in another; "
                             "make the masks disjoint")


def _masks(data: Data, split: Optional[Tuple[float, float]], seed: int) -> None:
    """Bool masks on ``data``: drawn from ``split`` ratios, or the data's own (index tensors converted)."""
    n = int(data.num_nodes)
    if split is not None:
        train, val = _check_ratios(split)
        given = [f"{s}_mask" for s in SPLITS if getattr(data, f"{s}_mask", None) is not None]
        if given:  # the split asked for wins, said once: the data's own masks are not used
            warnings.warn(f"split={tuple(split)!r} replaces the graph's own {', '.join(given)} (drop split to use "
                          "them)", UserWarning, stacklevel=4)
        data.train_mask, data.val_mask, data.test_mask = ratio_split(n, seed, train, val)
        return
    missing = [s for s in SPLITS if getattr(data, f"{s}_mask", None) is None]
    if missing:
        raise ValueError(f"the graph has no {', '.join(f'{s}_mask' for s in missing)}: set the masks on the data, "
                         "or pass split=(train_ratio, val_ratio) to draw a random split (the rest is test)")
    for s in SPLITS:
        mask = getattr(data, f"{s}_mask")
        if isinstance(mask, Tensor) and mask.dtype in (torch.int64, torch.int32) and mask.dim() == 1 \
                and (mask.numel() != n or bool((mask > 1).any()) or bool((mask < 0).any())):
            data[f"{s}_mask"] = _index_mask(s, mask, n)  # node indices, not a 0/1 mask
    _check_disjoint(data)


def _labels(data: Data, multilabel: bool, metric: str) -> None:
    """Labels the zoo can train on, or one line saying what to pass instead."""
    y = getattr(data, "y", None)
    if y is None:
        raise ValueError("the graph has no labels: set data.y (DGL: g.ndata['label']), one integer class per node "
                         "(or an (N, C) 0/1 matrix with multilabel=True)")
    if multilabel or metric == "rocauc" or not y.is_floating_point():
        return
    if y.dim() == 2 and y.size(1) > 1:
        raise ValueError(f"y is a {tuple(y.shape)} float matrix: several labels per node? pass multilabel=True; one "
                         "class per node: give its index, y = y.argmax(1)")
    raise ValueError(f"class labels must be integers, got y of dtype {y.dtype} (use y.long())")


def _inferred_classes(data: Data) -> int:
    """Largest label + 1 over the labelled nodes; a class with no node at all is a stray label, refused."""
    masks = [getattr(data, f"{s}_mask") for s in SPLITS]
    labelled = torch.stack(masks).any(0) if all(m.dtype == torch.bool and m.shape == masks[0].shape
                                                 for m in masks) else slice(None)
    y = data.y[labelled]
    if not y.numel():
        raise ValueError("no node is labelled: the masks select no node")
    num = int(y.max()) + 1
    present = torch.zeros(num, dtype=torch.bool)
    present[data.y[(data.y >= 0) & (data.y < num)].long()] = True
    empty = (~present).nonzero().view(-1).tolist()
    if empty and int(y.min()) >= 0:
        shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
        raise ValueError(f"the labels go up to {num - 1}, but no node has class {shown}: a stray label? pass "
                         f"num_classes={num} to keep empty classes, or number the classes 0..C-1 "
                         "(y = torch.unique(y, return_inverse=True)[1])")
    return num


def _check_features(data: Data) -> int:
    """``x`` is an (N, F) tensor; returns N, the number of nodes every other field is checked against."""
    x = getattr(data, "x", None)
    if x is None:
        raise ValueError("the graph has no node features: set data.x (DGL: g.ndata['feat']), e.g. a one-hot "
                         "identity torch.eye(num_nodes) when the graph has none")
    if not isinstance(x, Tensor):
        raise ValueError(f"data.x must be a tensor of shape (num_nodes, num_features), got {type(x).__name__}; "
                         "use torch.as_tensor(x, dtype=torch.float)")
    if x.dim() != 2:
        raise ValueError(f"data.x has shape {tuple(x.shape)}; give one row of features per node, shape "
                         "(num_nodes, num_features)" + (" (one feature per node: x.view(-1, 1))" if x.dim() == 1 else ""))
    return int(x.size(0))


def _check_edges(edge_index: Any, n: int) -> None:
    """``edge_index`` is a (2, E) integer tensor of node indices in ``[0, n)``."""
    if edge_index is None:
        raise ValueError("the graph has no edge_index: set data.edge_index, a (2, num_edges) tensor of node indices "
                         "(a graph without edges: torch.empty(2, 0, dtype=torch.long))")
    if not isinstance(edge_index, Tensor):
        raise ValueError(f"data.edge_index must be a (2, num_edges) tensor of node indices, got "
                         f"{type(edge_index).__name__}; use torch.as_tensor(edge_index, dtype=torch.long)")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        hint = "; if you have an (E, 2) edge list, pass edge_list.t()" if edge_index.dim() == 2 else ""
        raise ValueError(f"edge_index must have shape (2, num_edges), got {tuple(edge_index.shape)}{hint}")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        raise ValueError(f"edge_index must hold integer node indices, got dtype {edge_index.dtype} "
                         "(use edge_index.long())")
    if edge_index.numel():
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= n:
            raise ValueError(f"edge_index refers to node {low if low < 0 else high} but the graph has {n} nodes "
                             f"(valid indices 0..{n - 1}); check that x has one row per node")


def _check_graph(data: Data) -> None:
    """The fields every model reads, in the order a reader would check them; one line for the first problem.
    Integer labels of another width are widened to ``long`` (what the loss takes)."""
    n = _check_features(data)
    _check_edges(getattr(data, "edge_index", None), n)
    y = getattr(data, "y", None)
    if y is not None and not isinstance(y, Tensor):
        raise ValueError(f"data.y must be a tensor, got {type(y).__name__}; use torch.as_tensor(y)")
    if isinstance(y, Tensor):
        if y.dim() == 0 or y.size(0) != n:
            raise ValueError(f"y has shape {tuple(y.shape)} but the graph has {n} nodes (x has {n} rows): give one "
                             "label (row) per node")
        if not y.is_floating_point() and y.dtype not in (torch.bool, torch.long):
            data.y = y.long()


def task_from_data(cls: Any, data: Any, *, name: str, num_classes: Optional[int], split: Any, seed: int,
                   metric: str, multilabel: bool) -> Any:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    data = _as_data(data)
    _check_graph(data)
    _labels(data, multilabel, metric)
    y = data.y
    if not multilabel and y.dim() == 2 and y.size(1) == 1:
        data.y = y.view(-1)  # (N, 1) class labels, OGB's layout
    _masks(data, split, seed)
    if num_classes is None and (multilabel or data.y.is_floating_point()):  # targets, one column per task
        num_classes = int(data.y.size(-1)) if data.y.dim() == 2 else 2
    elif num_classes is None:
        num_classes = _inferred_classes(data)
    label = "masks" if split is None else f"random_ratio={split[0]}/{split[1]}:seed={seed}"
    return cls(name=name, kind="transductive", metric=metric, num_features=int(data.x.size(-1)),
               num_classes=num_classes, multilabel=multilabel, data=data, split=label,
               source="user data (Task.from_data)")
