"""Heterophilic graphs with the 10 Geom-GCN splits (Pei et al. 2020).

``WebKB`` (Cornell, Texas, Wisconsin), ``WikipediaNetwork`` with ``geom_gcn_preprocess=True``
(Chameleon, Squirrel) and ``Actor``. PyG keeps them directed and with self-loops; the
options ``undirected``, ``dedupe_edges`` and ``no_self_loops`` give the variants papers use.
The balance paper's Table 8 counts every undirected edge once, self-loops excluded:
``undirected=True, no_self_loops=True`` gives ``num_edges == 2 x`` its count.
``split=i`` (default 0) picks Geom-GCN split ``i``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from .._pyg_compat import dataset_class
from .cache import verified
from .registry import SPLIT_OPTIONS, edge_options, get_spec, instantiate, register_dataset, select_split, transductive_task

# name -> (class, folder holding raw/, split-file stem, nodes, edges, undirected edges, Table 8 edges,
#          features, train/val/test of split 0)
_HETERO = {
    "cornell": ("WebKB", "cornell", "cornell", 183, 298, 557, 277, 1703, (87, 59, 37)),
    "texas": ("WebKB", "texas", "texas", 183, 325, 574, 279, 1703, (87, 59, 37)),
    "wisconsin": ("WebKB", "wisconsin", "wisconsin", 251, 515, 916, 450, 1703, (120, 80, 51)),
    "chameleon": ("WikipediaNetwork", "chameleon/geom_gcn", "chameleon", 2277, 36101, 62792, 31371, 2325,
                  (1092, 729, 456)),
    "squirrel": ("WikipediaNetwork", "squirrel/geom_gcn", "squirrel", 5201, 217073, 396846, 198353, 2089,
                 (2496, 1664, 1041)),
    "actor": ("Actor", "Actor", "film", 7600, 30019, 53411, 26659, 932, (3648, 2432, 1520)),
}


def raw_files(folder: str, stem: str) -> list:
    files = [f"{folder}/raw/out1_node_feature_label.txt", f"{folder}/raw/out1_graph_edges.txt"]
    return files + [f"{folder}/raw/{stem}_split_0.6_0.2_{i}.npz" for i in range(10)]


def _factory(cls_name: str, name: str, root: Path):
    cls = dataset_class(cls_name)
    if cls_name == "WebKB":
        return (lambda: verified(cls)(str(root), name)), f"torch_geometric.datasets.WebKB(root={str(root)!r}, name={name!r})"
    if cls_name == "WikipediaNetwork":
        return ((lambda: verified(cls)(str(root), name, geom_gcn_preprocess=True)),
                f"torch_geometric.datasets.WikipediaNetwork(root={str(root)!r}, name={name!r}, geom_gcn_preprocess=True)")
    actor_root = str(root / "Actor")
    return (lambda: verified(cls)(actor_root)), f"torch_geometric.datasets.Actor(root={actor_root!r})"


def _make_loader(name: str, cls_name: str, folder: str, stem: str):
    def load_heterophilic(root: Path, split: Union[int, str, None], seed: int, undirected: bool = False,
                          dedupe_edges: bool = False, no_self_loops: bool = False,
                          download: Optional[bool] = None, **split_opts: Any):
        factory, source = _factory(cls_name, name, root)
        ds = instantiate(name, root, raw_files(folder, stem), source, factory, download, expected=get_spec(name).stats)
        data, label = select_split(ds[0], split, seed, default=0, **split_opts)
        return transductive_task(name, data, "accuracy", source, label,
                                 edge_options(undirected=undirected, dedupe_edges=dedupe_edges,
                                              no_self_loops=no_self_loops), seed, num_classes=ds.num_classes)
    return load_heterophilic


for _name, (_cls, _folder, _stem, _n, _e, _ue, _t8, _f, _sizes) in _HETERO.items():
    register_dataset(
        _name, kind="transductive", metric="accuracy", source=f"torch_geometric.datasets.{_cls}",
        options={"undirected": False, "dedupe_edges": False, "no_self_loops": False, "download": None,
                 **SPLIT_OPTIONS},
        raw_files=raw_files(_folder, _stem),
        stats={"nodes": _n, "edges": _e, "undirected_edges": _ue, "table8_edges": _t8, "features": _f,
               "classes": 5, "split0": _sizes, "num_splits": 10},
        aliases=("film",) if _name == "actor" else (),
    )(_make_loader(_name, _cls, _folder, _stem))
