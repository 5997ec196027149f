"""Planetoid citation graphs (Cora, CiteSeer, PubMed) through ``torch_geometric.datasets.Planetoid``.

Splits: ``"public"`` (Yang et al. 2016; default), ``i`` / ``"geom_gcn"`` (the 10 Geom-GCN
splits, Pei et al. 2020), ``"per_class"`` / ``"ratio"`` (seeded random).
``remove_isolated=True`` drops isolated nodes (CiteSeer has 48), as the balance paper does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from .._pyg_compat import dataset_class
from .cache import verified
from .registry import SPLIT_OPTIONS, edge_options, get_spec, instantiate, register_dataset, select_split, transductive_task

_IND = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")

# name -> (PyG name, nodes, edges, features, classes, public train/val/test)
_PLANETOID = {
    "cora": ("Cora", 2708, 10556, 1433, 7, (140, 500, 1000)),
    "citeseer": ("CiteSeer", 3327, 9104, 3703, 6, (120, 500, 1000)),
    "pubmed": ("PubMed", 19717, 88648, 500, 3, (60, 500, 1000)),
}


def raw_files(pyg_name: str, geom_gcn: bool) -> list:
    low = pyg_name.lower()
    folder = f"{pyg_name}/geom-gcn/raw" if geom_gcn else f"{pyg_name}/raw"
    files = [f"{folder}/ind.{low}.{ext}" for ext in _IND]
    if geom_gcn:
        files += [f"{folder}/{low}_split_0.6_0.2_{i}.npz" for i in range(10)]
    return files


def _make_loader(name: str, pyg_name: str):
    def load_planetoid(root: Path, split: Union[int, str, None], seed: int, remove_isolated: bool = False,
                       download: Optional[bool] = None, **split_opts: Any):
        Planetoid = dataset_class("Planetoid")
        geom = isinstance(split, int) and not isinstance(split, bool) or (
            isinstance(split, str) and split.replace("-", "_").lower() == "geom_gcn")
        pyg_split = "geom-gcn" if geom else "public"
        source = f"torch_geometric.datasets.Planetoid(root={str(root)!r}, name={pyg_name!r}, split={pyg_split!r})"
        ds = instantiate(name, root, raw_files(pyg_name, geom), source,
                         lambda: verified(Planetoid)(str(root), pyg_name, split=pyg_split), download,
                         expected=get_spec(name).stats)
        data, label = select_split(ds[0], split, seed, default="public", **split_opts)
        return transductive_task(name, data, "accuracy", source, label,
                                 edge_options(remove_isolated=remove_isolated), seed,
                                 num_classes=ds.num_classes)
    return load_planetoid


for _name, (_pyg, _n, _e, _f, _c, _sizes) in _PLANETOID.items():
    register_dataset(
        _name, kind="transductive", metric="accuracy", source=f"torch_geometric.datasets.Planetoid(name={_pyg!r})",
        options={"remove_isolated": False, "download": None, **SPLIT_OPTIONS},
        raw_files=raw_files(_pyg, False),
        stats={"nodes": _n, "edges": _e, "features": _f, "classes": _c, "public_split": _sizes,
               "num_splits": 10},
    )(_make_loader(_name, _pyg))
