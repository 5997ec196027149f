"""The heterophilous benchmark's npz files (Platonov et al., ICLR 2023; yandex-research/heterophilous-graphs).

Parsed by PyG's ``HeterophilousGraphDataset`` (its ``process``), which accepts only five
names: :class:`NpzHeterophilous` lifts the name check and keeps the edges **as stored**
in the processed file, so both edge conventions come from one parse:

* ``edges="undirected"`` (default; the upstream README's warning): the npz stores each
  undirected pair once, so messages must be sent both ways. Same result as PyG's class.
* ``edges="as_stored"``: ``edge_index = edges.T`` unchanged, as the balance paper's code
  (``runExpOthers.py``, ``getDataHet``) used it. Default for the ``*_directed`` files,
  which hold directed edges (and self-loops).

Names: ``minesweeper``, ``tolokers`` (binary, ROC-AUC as in the paper), ``chameleon_filtered``,
``squirrel_filtered`` (duplicate nodes removed) and their ``_directed`` forms, and the npz
versions of the classic sets under ``<name>_npz`` (``cornell_npz`` ... ``squirrel_npz``,
``chameleon_directed_npz``, ``squirrel_directed_npz``): they are not PyG's Geom-GCN files
of the same name (e.g. Cornell's labels and features differ; see docs/datasets.md).
``split=i`` (default 0) picks one of the 10 splits stored in the file.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from .._names import unknown_name_error
from .._pyg_compat import dataset_class
from .cache import verified
from .registry import SPLIT_OPTIONS, get_spec, instantiate, register_dataset, select_split, transductive_task

_PATCH_LOCK = threading.Lock()


@contextmanager
def _edges_as_stored() -> Iterator[None]:
    """PyG's ``process`` symmetrises with the module's ``to_undirected``; keep the stored edges."""
    import torch_geometric.datasets.heterophilous_graph_dataset as mod  # the module alone (zoo/_pyg_compat.py)

    with _PATCH_LOCK:
        saved = mod.to_undirected
        mod.to_undirected = lambda edge_index, num_nodes=None: edge_index  # type: ignore[assignment]
        try:
            yield
        finally:
            mod.to_undirected = saved


def _npz_class():
    from torch_geometric.data import InMemoryDataset
    HeterophilousGraphDataset = dataset_class("HeterophilousGraphDataset")

    class NpzHeterophilous(HeterophilousGraphDataset):
        """``HeterophilousGraphDataset`` for any yandex-research npz name, edges as stored."""

        zoo_processing_version = 1

        def __init__(self, root: str, name: str) -> None:  # the parent asserts one of five names
            self.name = name
            InMemoryDataset.__init__(self, root)
            self.load(self.processed_paths[0])

        @property
        def processed_dir(self) -> str:  # not PyG's folder: its file is symmetrised, ours is not
            return str(Path(self.root) / self.name / "processed_as_stored")

        def process(self) -> None:
            with _edges_as_stored():
                super().process()

    return NpzHeterophilous


_CLASS = None


def npz_class():
    global _CLASS
    if _CLASS is None:
        _CLASS = _npz_class()
    return _CLASS


# zoo name -> (npz name, nodes, stored edges, symmetrised edges, features, classes, metric, split-0 sizes)
NPZ = {
    "minesweeper": ("minesweeper", 10000, 39402, 78804, 7, 2, "rocauc", (5000, 2500, 2500)),
    "tolokers": ("tolokers", 11758, 519000, 1038000, 10, 2, "rocauc", (5879, 2939, 2940)),
    "chameleon_filtered": ("chameleon_filtered", 890, 8854, 17708, 2325, 5, "accuracy", (409, 287, 194)),
    "squirrel_filtered": ("squirrel_filtered", 2223, 46998, 93996, 2089, 5, "accuracy", (1053, 718, 452)),
    "chameleon_filtered_directed": ("chameleon_filtered_directed", 890, 13584, 17758, 2325, 5, "accuracy",
                                    (409, 287, 194)),
    "squirrel_filtered_directed": ("squirrel_filtered_directed", 2223, 65718, 94136, 2089, 5, "accuracy",
                                   (1053, 718, 452)),
    "cornell_npz": ("cornell", 183, 277, 554, 1703, 5, "accuracy", (87, 59, 37)),
    "texas_npz": ("texas", 183, 279, 558, 1703, 5, "accuracy", (87, 59, 37)),
    "wisconsin_npz": ("wisconsin", 251, 450, 900, 1703, 5, "accuracy", (120, 80, 51)),
    "actor_npz": ("actor", 7600, 26659, 53318, 932, 5, "accuracy", (3648, 2432, 1520)),
    "chameleon_npz": ("chameleon", 2277, 31371, 62742, 2325, 5, "accuracy", (1092, 729, 456)),
    "squirrel_npz": ("squirrel", 5201, 198353, 396706, 2089, 5, "accuracy", (2496, 1664, 1041)),
    "chameleon_directed_npz": ("chameleon_directed", 2277, 36101, 62792, 2325, 5, "accuracy", (1092, 729, 456)),
    "squirrel_directed_npz": ("squirrel_directed", 5201, 217073, 396846, 2089, 5, "accuracy",
                              (2496, 1664, 1041)),
}
EDGE_MODES = ("undirected", "as_stored")


def raw_file(npz: str) -> str:
    return f"heterophilous/{npz}/raw/{npz}.npz"


def _make_loader(name: str, npz: str, metric: str):
    def load_npz(root: Path, split: Union[int, str, None], seed: int, edges: Optional[str] = None,
                 download: Optional[bool] = None, **split_opts: Any):
        mode = ("as_stored" if "directed" in npz else "undirected") if edges is None else str(edges)
        if mode not in EDGE_MODES:
            raise unknown_name_error("edges mode", mode, list(EDGE_MODES),
                                     hint="'undirected' symmetrises the stored pairs; 'as_stored' keeps them.")
        base = root / "heterophilous"
        source = (f"torch_geometric.datasets.HeterophilousGraphDataset parser (root={str(base)!r}, name={npz!r}; "
                  f"yandex-research/heterophilous-graphs data/{npz}.npz)")
        ds = instantiate(name, root, [raw_file(npz)], source, lambda: verified(npz_class())(str(base), npz),
                         download, expected=get_spec(name).stats)
        data, label = select_split(ds[0], split, seed, default=0, **split_opts)
        pre = [] if mode == "as_stored" else ["undirected"]
        task = transductive_task(name, data, metric, source, label, pre, seed, num_classes=ds.num_classes)
        if mode == "as_stored":
            task.preprocessing = ("edges as stored (not symmetrised)",) + tuple(task.preprocessing)
        return task
    return load_npz


for _name, (_npz, _n, _e, _ue, _f, _c, _metric, _sizes) in NPZ.items():
    register_dataset(
        _name, kind="transductive", metric=_metric,
        source="torch_geometric.datasets.HeterophilousGraphDataset (npz parser)",
        options={"edges": None, "download": None, **SPLIT_OPTIONS},
        raw_files=[raw_file(_npz)],
        stats={"nodes": _n, "edges": _e, "undirected_edges": _ue, "features": _f, "classes": _c,
               "split0": _sizes, "num_splits": 10},
        note=("edges: 'undirected' (default) or 'as_stored'" if "directed" not in _npz
              else "directed edges; edges='as_stored' (default) or 'undirected'"),
    )(_make_loader(_name, _npz, _metric))
