"""Datasets and tasks: PyG/OGB loaders with an offline mirror, standard splits, transforms,
and the synthetic TREES and twin generators. See ``docs/datasets.md``.

>>> task = zoo.datasets.load("cora")                       # public split
>>> task = zoo.datasets.load("chameleon", split=3, undirected=True)
>>> task = zoo.datasets.load("amazon_photo", split="ratio", train_ratio=0.6, val_ratio=0.2, seed=1)
>>> task = zoo.datasets.load("pubmed", transforms=[("missing_features", {"p": 1.0})])
"""
from . import transforms
from .mirror import ChecksumError, MissingDataError, mirror_dirs, resolve_root
from .registry import DATASETS, DatasetSpec, format_datasets_table, get_spec, list_datasets, load, register_dataset
from .task import Task

# Importing the family modules registers their names.
from . import planetoid, heterophilic, heterophilous_npz, coauthor_amazon, ogb_datasets, synthetic  # noqa: E402,F401  isort:skip
from . import gate_synthetic  # noqa: E402,F401  isort:skip

__all__ = [
    "load", "list_datasets", "format_datasets_table", "Task", "register_dataset", "transforms",
    "DatasetSpec", "DATASETS", "get_spec", "MissingDataError", "ChecksumError", "mirror_dirs", "resolve_root",
]
