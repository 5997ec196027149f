"""Amazon, Coauthor and CoraFull (Shchur et al. 2018), which ship without split masks.

Splits are seeded and random: ``"per_class"`` (default: 20 train and 30 validation nodes per
class, the rest test; ``num_val=500`` / ``num_test=1000`` switch to fixed totals) or
``"ratio"`` (``train_ratio``/``val_ratio``/rest, e.g. the nonlocal paper's 60/20/20).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from .._pyg_compat import dataset_class
from .cache import verified
from .registry import SPLIT_OPTIONS, edge_options, get_spec, instantiate, register_dataset, select_split, transductive_task

# name -> (class, class name arg, root suffix, raw file (relative to data root), nodes, edges, features, classes)
_SHCHUR = {
    "amazon_computers": ("Amazon", "Computers", "", "Computers/raw/amazon_electronics_computers.npz",
                         13752, 491722, 767, 10),
    "amazon_photo": ("Amazon", "Photo", "", "Photo/raw/amazon_electronics_photo.npz", 7650, 238162, 745, 8),
    "coauthor_cs": ("Coauthor", "CS", "", "CS/raw/ms_academic_cs.npz", 18333, 163788, 6805, 15),
    "coauthor_physics": ("Coauthor", "Physics", "", "Physics/raw/ms_academic_phy.npz", 34493, 495924, 8415, 5),
    "cora_full": ("CitationFull", "Cora", "CitationFull", "CitationFull/cora/raw/cora.npz",
                  19793, 126842, 8710, 70),
}


def _make_loader(name: str, cls_name: str, arg: str, sub: str, raw: str):
    def load_shchur(root: Path, split: Union[int, str, None], seed: int, remove_isolated: bool = False,
                    download: Optional[bool] = None, **split_opts: Any):
        cls = verified(dataset_class(cls_name))
        ds_root = str(root / sub) if sub else str(root)
        source = f"torch_geometric.datasets.{cls_name}(root={ds_root!r}, name={arg!r})"
        ds = instantiate(name, root, [raw], source, lambda: cls(ds_root, arg), download, expected=get_spec(name).stats)
        data, label = select_split(ds[0], split, seed, default="per_class", **split_opts)
        return transductive_task(name, data, "accuracy", source, label,
                                 edge_options(remove_isolated=remove_isolated), seed, num_classes=ds.num_classes)
    return load_shchur


for _name, (_cls, _arg, _sub, _raw, _n, _e, _f, _c) in _SHCHUR.items():
    register_dataset(
        _name, kind="transductive", metric="accuracy", source=f"torch_geometric.datasets.{_cls}(name={_arg!r})",
        options={"remove_isolated": False, "download": None, **SPLIT_OPTIONS},
        raw_files=[_raw], stats={"nodes": _n, "edges": _e, "features": _f, "classes": _c},
    )(_make_loader(_name, _cls, _arg, _sub, _raw))
