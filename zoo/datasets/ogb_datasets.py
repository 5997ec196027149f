"""PPI (PyG) and OGB datasets with their official splits and (for OGB) Evaluator.

* ``ppi``: inductive, 121 labels, micro-F1 (``torch_geometric.datasets.PPI``; 20/2/2 graphs).
* ``ogbn_arxiv``: transductive, 40 classes, accuracy (OGB Evaluator).
* ``ogbn_proteins``: transductive, 112 binary labels, ROC-AUC. It has no node features; ``x``
  is the mean of the incident edges' 8-d features (the usual choice in PyG's examples).
* ``ogbg_molhiv``: graph classification, ROC-AUC, scaffold split. Atom features are the
  integer OGB codes cast to float.

OGB data lives in ``<root>/ogb/<ogbn_arxiv ...>/`` (mirror: ``<mirror>/ogb/<dir>/``, copied
whole). The option ``meta_dict`` (what ``ogb.io.DatasetSaver.get_meta_dict()`` returns) loads
a dataset saved in OGB's own format instead of the official release; the tests use it to
round-trip small datasets, since the real files are not in the offline mirror.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import torch
from torch_geometric.data import Data

from . import mirror
from .registry import edge_options, instantiate, register_dataset, transductive_task
from .task import Task, mask_from_index

# ----------------------------------------------------------------------------- PPI

_PPI_RAW = [f"PPI/raw/{s}_{f}" for s in ("train", "valid", "test")
            for f in ("feats.npy", "graph_id.npy", "graph.json", "labels.npy")]


@register_dataset("ppi", kind="inductive", metric="micro_f1", source="torch_geometric.datasets.PPI",
                  options={"download": None}, raw_files=_PPI_RAW,
                  stats={"graphs": 24, "nodes": 56944, "edges": 818716, "features": 50, "classes": 121})
def load_ppi(root: Path, split: Union[int, str, None], seed: int, download: Optional[bool] = None) -> Task:
    from torch_geometric.datasets import PPI

    if split not in (None, "official"):
        raise ValueError(f"ppi has only its official 20/2/2 graph split; got split={split!r}")
    ppi_root = str(root / "PPI")
    source = f"torch_geometric.datasets.PPI(root={ppi_root!r})"
    graphs = {s: list(instantiate("ppi", root, _PPI_RAW, source, lambda s=s: PPI(ppi_root, split=s), download))
              for s in ("train", "val", "test")}
    first = graphs["train"][0]
    return Task(name="ppi", kind="inductive", metric="micro_f1", num_features=int(first.num_features),
                num_classes=int(first.y.size(-1)), multilabel=True, graphs=graphs, split="official",
                source=source)


# ----------------------------------------------------------------------------- OGB

def _ogb_safe_globals() -> list:
    """Types ogb 1.3's own ``torch.load`` calls need under torch's ``weights_only`` default:
    PyG's Data internals (processed files) and numpy arrays (``split_dict.pt``)."""
    import numpy as np
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar  # type: ignore[no-redef]
    dtypes = [type(np.dtype(t)) for t in ("int64", "int32", "float32", "float64", "bool", "uint8", "int16")]
    return [DataEdgeAttr, DataTensorAttr, GlobalStorage, _reconstruct, scalar, np.ndarray, np.dtype, *dtypes]


def _ogb_dir(ogb_name: str) -> str:
    return "ogb/" + "_".join(ogb_name.split("-"))


def _ogb_dataset(name: str, ogb_name: str, root: Path, meta_dict: Optional[Mapping[str, Any]],
                 download: Optional[bool], expected: List[str]):
    if ogb_name.startswith("ogbg"):
        from ogb.graphproppred import PygGraphPropPredDataset as cls
    else:
        from ogb.nodeproppred import PygNodePropPredDataset as cls
    rel_dir = _ogb_dir(ogb_name)
    present = mirror.stage_tree(name, root, rel_dir)
    if meta_dict is not None:
        meta = dict(meta_dict)
        meta["dir_path"] = str(root / rel_dir)
        source = f"ogb {cls.__name__}({ogb_name!r}, meta_dict=<saved dataset>, dir={meta['dir_path']!r})"
        factory = lambda: cls(ogb_name, meta_dict=meta)  # noqa: E731
    else:
        source = f"ogb {cls.__name__}({ogb_name!r}, root={str(root / 'ogb')!r})"
        factory = lambda: cls(ogb_name, root=str(root / "ogb"))  # noqa: E731
    missing = [] if present else [f"{rel_dir}/{f}" for f in expected]
    if missing and not mirror.downloads_allowed(download):
        raise mirror.missing_data_error(name, root, missing, source)
    try:
        with torch.serialization.safe_globals(_ogb_safe_globals()):
            return factory(), source
    except Exception as e:
        if missing:
            raise mirror.missing_data_error(name, root, missing, source, cause=e) from e
        raise


def _node_split(ds, n: int) -> Dict[str, torch.Tensor]:
    with torch.serialization.safe_globals(_ogb_safe_globals()):
        idx = ds.get_idx_split()
    return {"train": mask_from_index(torch.as_tensor(idx["train"]), n),
            "val": mask_from_index(torch.as_tensor(idx["valid"]), n),
            "test": mask_from_index(torch.as_tensor(idx["test"]), n)}


_NODE_EXPECTED = ["RELEASE_v1.txt", "raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/node-label.csv.gz",
                  "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", "split/<split>/{train,valid,test}.csv.gz"]


def _make_node_loader(name: str, ogb_name: str, metric: str):
    def load_ogbn(root: Path, split: Union[int, str, None], seed: int, undirected: bool = False,
                  meta_dict: Optional[Mapping[str, Any]] = None, download: Optional[bool] = None) -> Task:
        if split not in (None, "official"):
            raise ValueError(f"{name} has only its official split; got split={split!r}")
        ds, source = _ogb_dataset(name, ogb_name, root, meta_dict, download, _NODE_EXPECTED)
        raw = ds[0]
        masks = _node_split(ds, raw.num_nodes)
        multilabel = raw.y.dim() == 2 and raw.y.size(1) > 1
        y = raw.y.float() if multilabel else raw.y.view(-1).long()
        pre = []
        x = raw.x
        if x is None and getattr(raw, "edge_attr", None) is not None:
            from torch_geometric.utils import scatter

            x = scatter(raw.edge_attr.float(), raw.edge_index[1], dim=0, dim_size=raw.num_nodes, reduce="mean")
            pre.append("x = mean of incoming edge features")
        data = Data(x=x.float(), edge_index=raw.edge_index, y=y, train_mask=masks["train"],
                    val_mask=masks["val"], test_mask=masks["test"])
        num_classes = int(y.size(1)) if multilabel else int(ds.num_classes)
        return transductive_task(name, data, metric, source, "official", edge_options(undirected=undirected),
                                 seed, num_classes=num_classes, multilabel=multilabel, preprocessing=pre,
                                 ogb_evaluator=ogb_name)
    return load_ogbn


register_dataset("ogbn_arxiv", kind="transductive", metric="accuracy",
                 source="ogb.nodeproppred.PygNodePropPredDataset('ogbn-arxiv')",
                 options={"undirected": False, "meta_dict": None, "download": None},
                 raw_files=[_ogb_dir("ogbn-arxiv") + "/"],
                 stats={"nodes": 169343, "edges": 1166243, "features": 128, "classes": 40})(
    _make_node_loader("ogbn_arxiv", "ogbn-arxiv", "accuracy"))
register_dataset("ogbn_proteins", kind="transductive", metric="rocauc",
                 source="ogb.nodeproppred.PygNodePropPredDataset('ogbn-proteins')",
                 options={"undirected": False, "meta_dict": None, "download": None},
                 raw_files=[_ogb_dir("ogbn-proteins") + "/"],
                 stats={"nodes": 132534, "edges": 79122504, "features": 8, "classes": 112})(
    _make_node_loader("ogbn_proteins", "ogbn-proteins", "rocauc"))


_GRAPH_EXPECTED = ["RELEASE_v1.txt", "raw/edge.csv.gz", "raw/node-feat.csv.gz", "raw/edge-feat.csv.gz",
                   "raw/graph-label.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz",
                   "split/scaffold/{train,valid,test}.csv.gz", "mapping/mol.csv.gz"]


@register_dataset("ogbg_molhiv", kind="graph", metric="rocauc",
                  source="ogb.graphproppred.PygGraphPropPredDataset('ogbg-molhiv')",
                  options={"meta_dict": None, "download": None, "max_graphs": None},
                  raw_files=[_ogb_dir("ogbg-molhiv") + "/"],
                  stats={"graphs": 41127, "features": 9, "classes": 1})
def load_molhiv(root: Path, split: Union[int, str, None], seed: int,
                meta_dict: Optional[Mapping[str, Any]] = None, download: Optional[bool] = None,
                max_graphs: Optional[int] = None) -> Task:
    """``max_graphs``: keep only the first ``max_graphs`` graphs of each split (official order), a
    small subset for smoke tests and ``--quick`` suites (300 keeps 11/7/8 positives)."""
    if split not in (None, "official", "scaffold"):
        raise ValueError(f"ogbg_molhiv has only its official scaffold split; got split={split!r}")
    if max_graphs is not None and (isinstance(max_graphs, bool) or not isinstance(max_graphs, int)
                                   or max_graphs < 1):
        raise ValueError(f"max_graphs must be a positive integer (graphs kept per split), got {max_graphs!r}")
    ds, source = _ogb_dataset("ogbg_molhiv", "ogbg-molhiv", root, meta_dict, download, _GRAPH_EXPECTED)
    with torch.serialization.safe_globals(_ogb_safe_globals()):
        idx = ds.get_idx_split()

    def graph(i: int) -> Data:
        g = ds[int(i)]
        return Data(x=g.x.float(), edge_index=g.edge_index, edge_attr=g.edge_attr, y=g.y.view(1, -1))

    graphs = {s: [graph(i) for i in idx[k][:max_graphs]]
              for s, k in (("train", "train"), ("val", "valid"), ("test", "test"))}
    return Task(name="ogbg_molhiv", kind="graph", metric="rocauc", num_features=int(ds.num_features),
                num_classes=int(ds.num_tasks), multilabel=False, graphs=graphs, split="scaffold",
                preprocessing=("x = OGB atom codes as float",), source=source, ogb_evaluator="ogbg-molhiv")
