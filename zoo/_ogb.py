"""OGB, imported without touching the user's home folder.

``ogb.graphproppred`` and ``ogb.nodeproppred`` try ``import dgl`` for their DGL datasets.  A DGL
installed beside the zoo with no backend chosen then prints "DGL backend not selected" and writes
``~/.dgl/config.json`` — from a plain ``zoo list suites``.  DGL's own default backend (PyTorch) is
chosen for this process instead, unless the user chose one (``DGLBACKEND``).
"""
from __future__ import annotations

import importlib
import os
from types import ModuleType


def ogb_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` for an ``ogb`` module, with DGL's backend chosen first."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    return importlib.import_module(name)
