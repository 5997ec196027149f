"""PPI (PyG) and OGB datasets with their official splits and (for OGB) Evaluator.

* ``ppi``: inductive, 121 labels, micro-F1 (``torch_geometric.datasets.PPI``; 20/2/2 graphs).
* ``ogbn_arxiv``: transductive, 40 classes, accuracy (OGB Evaluator).
* ``ogbn_proteins``: transductive, 112 binary labels, ROC-AUC. It has no node features; ``x``
  is the mean of the incident edges' 8-d features (the usual choice in PyG's examples).
* ``ogbg_molhiv``: graph classification, ROC-AUC, scaffold split. Atom features are the
  integer OGB category codes (int64, 9 per atom; ``edge_attr`` 3 per bond), for
  ``ogb.graphproppred.mol_encoder.AtomEncoder`` / ``BondEncoder``.

OGB data lives in ``<root>/ogb/<ogbn_arxiv ...>/`` (mirror: ``<mirror>/ogb/<dir>/``, copied
whole). The option ``meta_dict`` (what ``ogb.io.DatasetSaver.get_meta_dict()`` returns) loads
a dataset saved in OGB's own format instead of the official release; the tests use it to
round-trip small datasets, since the real files are not in the offline mirror.
"""
from __future__ import annotations

import shutil
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import torch
from torch_geometric.data import Data

from .._ogb import ogb_module
from .._pyg_compat import dataset_class
from . import mirror
from .cache import allow_globals, allowed_globals, verified
from .registry import edge_options, get_spec, instantiate, register_dataset, transductive_task
from .task import Task, mask_from_index

# ----------------------------------------------------------------------------- PPI

_PPI_RAW = [f"PPI/raw/{s}_{f}" for s in ("train", "valid", "test")
            for f in ("feats.npy", "graph_id.npy", "graph.json", "labels.npy")]


@register_dataset("ppi", kind="inductive", metric="micro_f1", source="torch_geometric.datasets.PPI",
                  options={"download": None}, raw_files=_PPI_RAW,
                  stats={"graphs": 24, "nodes": 56944, "edges": 818716, "features": 50, "classes": 121})
def load_ppi(root: Path, split: Union[int, str, None], seed: int, download: Optional[bool] = None) -> Task:
    PPI = dataset_class("PPI")
    if split not in (None, "official"):
        raise ValueError(f"ppi has only its official 20/2/2 graph split; got split={split!r}")
    ppi_root = str(root / "PPI")
    source = f"torch_geometric.datasets.PPI(root={ppi_root!r})"
    graphs = {s: list(instantiate("ppi", root, _PPI_RAW, source, lambda s=s: verified(PPI)(ppi_root, split=s),
                                   download, expected={"features": 50}))
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
    return [*allowed_globals(), DataEdgeAttr, DataTensorAttr, GlobalStorage, _reconstruct, scalar, np.ndarray,
            np.dtype, *dtypes]


def _ogb_dir(ogb_name: str) -> str:
    return "ogb/" + "_".join(ogb_name.split("-"))


def _ogb_meta(ogb_name: str, meta_dict: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    if meta_dict is not None:
        return meta_dict
    import ogb
    import pandas as pd

    sub = "graphproppred" if ogb_name.startswith("ogbg") else "nodeproppred"
    master = pd.read_csv(Path(ogb.__file__).parent / sub / "master.csv", index_col=0, keep_default_na=False)
    return master[ogb_name].to_dict()


def ogb_required_files(ogb_name: str, meta: Mapping[str, Any]) -> List[str]:
    """Files (relative to the OGB dataset folder) a complete release must hold.

    ``split/<name>/`` may hold ``split_dict.pt`` instead of the three csv files.
    """
    binary = str(meta.get("binary")) == "True"
    label = "graph-label" if ogb_name.startswith("ogbg") else "node-label"
    if binary:
        raw = ["raw/data.npz", f"raw/{label}.npz"]
    else:
        raw = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz", f"raw/{label}.csv.gz"]
        raw += ["raw/node-feat.csv.gz"] if str(meta.get("has_node_attr")) == "True" else []
        raw += ["raw/edge-feat.csv.gz"] if str(meta.get("has_edge_attr")) == "True" else []
    return [f"RELEASE_v{meta['version']}.txt"] + raw + [f"split/{meta['split']}/"]


def ogb_incomplete(folder: Path, required: Sequence[str]) -> List[str]:
    """The entries of ``required`` missing (or empty) under an OGB dataset ``folder``."""
    out = []
    for rel in required:
        p = folder / rel
        if rel.endswith("/"):
            ok = (p / "split_dict.pt").is_file() or all(
                (p / f"{s}.csv.gz").is_file() and (p / f"{s}.csv.gz").stat().st_size > 0
                for s in ("train", "valid", "test"))
        else:
            ok = p.is_file() and p.stat().st_size > 0
        if not ok:
            out.append(rel)
    return out


@contextmanager
def _never_prompt(name: str, folder: Path) -> Iterator[None]:
    """OGB asks ``input("Will you update the dataset now?")`` (and before large downloads);
    the zoo never reads stdin: any prompt becomes a clear error instead."""
    import builtins

    def refuse(prompt: str = "") -> str:
        raise mirror.MissingDataError(
            f"dataset {name!r}: ogb asked {prompt.strip()!r} about {folder}; the zoo never prompts. The folder "
            f"is not a complete OGB release: delete it so it is staged again from the mirror "
            f"(${mirror.MIRROR_ENV}) or downloaded.")

    saved = builtins.input
    builtins.input = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        builtins.input = saved  # type: ignore[assignment]


def _ogb_dataset(name: str, ogb_name: str, root: Path, meta_dict: Optional[Mapping[str, Any]],
                 download: Optional[bool], expected: List[str], keys: Sequence[str]):
    """The OGB dataset, staged and verified; ``keys``: the registry statistics it must match."""
    if ogb_name.startswith("ogbg"):
        base = ogb_module("ogb.graphproppred").PygGraphPropPredDataset
    else:
        base = ogb_module("ogb.nodeproppred").PygNodePropPredDataset
    cls = verified(base)
    rel_dir = _ogb_dir(ogb_name)
    folder = root / rel_dir
    in_mirror = mirror.stage_tree(name, root, rel_dir)  # completes a partial folder, verifying every file
    if meta_dict is not None:
        meta = dict(meta_dict)
        meta["dir_path"] = str(folder)
        source = f"ogb {base.__name__}({ogb_name!r}, meta_dict=<saved dataset>, dir={meta['dir_path']!r})"
        factory = lambda: cls(ogb_name, meta_dict=meta)  # noqa: E731
    else:
        source = f"ogb {base.__name__}({ogb_name!r}, root={str(root / 'ogb')!r})"
        factory = lambda: cls(ogb_name, root=str(root / "ogb"))  # noqa: E731
    lacking = ogb_incomplete(folder, ogb_required_files(ogb_name, _ogb_meta(ogb_name, meta_dict)))
    missing: List[str] = []
    if lacking:
        if in_mirror:
            raise mirror.missing_data_error(name, root, [f"{rel_dir}/{f}" for f in lacking], source
                                            + " (the mirror's copy is incomplete)")
        if not mirror.downloads_allowed(download):
            if folder.exists():
                raise mirror.MissingDataError(
                    f"dataset {name!r}: {folder} is not a complete OGB release (missing "
                    f"{', '.join(lacking)}; e.g. left by a failed download). Delete it, then put the complete "
                    f"folder at {rel_dir}/ under a mirror (${mirror.MIRROR_ENV}) or the data root, or allow "
                    f"the download.")
            raise mirror.missing_data_error(name, root, [f"{rel_dir}/{f}" for f in expected], source)
        if folder.exists():  # a partial download: start again instead of letting ogb prompt
            warnings.warn(f"removing incomplete OGB folder {folder} (missing {', '.join(lacking)}) "
                          f"before downloading it again", RuntimeWarning, stacklevel=3)
            shutil.rmtree(folder)
        missing = [f"{rel_dir}/{f}" for f in expected]
    try:
        with _never_prompt(name, folder), allow_globals(_ogb_safe_globals()):
            check = {} if meta_dict is not None else {k: v for k, v in get_spec(name).stats.items() if k in keys}
            return instantiate(name, root, [], source, factory, download=True, expected=check), source
    except mirror.MissingDataError:
        raise
    except Exception as e:
        if missing:
            raise mirror.missing_data_error(name, root, missing, source, cause=e) from e
        raise


def _node_split(ds, n: int) -> Dict[str, torch.Tensor]:
    with allow_globals(_ogb_safe_globals()):
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
        ds, source = _ogb_dataset(name, ogb_name, root, meta_dict, download, _NODE_EXPECTED,
                                  ("nodes", "edges", "features", "classes") if ogb_name == "ogbn-arxiv"
                                  else ("nodes", "edges"))
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
                  stats={"graphs": 41127, "nodes": 1049163, "edges": 2259376, "features": 9, "classes": 1,
                         "split": (32901, 4113, 4113)})
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
    ds, source = _ogb_dataset("ogbg_molhiv", "ogbg-molhiv", root, meta_dict, download, _GRAPH_EXPECTED,
                              ("graphs", "nodes", "edges", "features"))
    with allow_globals(_ogb_safe_globals()):
        idx = ds.get_idx_split()

    def graph(i: int) -> Data:
        g = ds[int(i)]  # x, edge_attr: int64 OGB category codes (for AtomEncoder / BondEncoder)
        return Data(x=g.x, edge_index=g.edge_index, edge_attr=g.edge_attr, y=g.y.view(1, -1))

    graphs = {s: [graph(i) for i in idx[k][:max_graphs]]
              for s, k in (("train", "train"), ("val", "valid"), ("test", "test"))}
    return Task(name="ogbg_molhiv", kind="graph", metric="rocauc", num_features=int(ds.num_features),
                num_classes=int(ds.num_tasks), multilabel=False, graphs=graphs, split="scaffold",
                source=source, ogb_evaluator="ogbg-molhiv")
