"""gat-zoo: a model zoo for deep graph attention networks.

>>> import zoo
>>> model = zoo.build("gatv2", in_dim=1433, out_dim=7, num_layers=10, init="bal_o")
>>> out = model(edge_index, x)             # also a PyG Data or a dgl.DGLGraph

The public names load on first use (PEP 562): ``import zoo`` itself imports no torch, so the
torch-free layers (``zoo.bench.suite``, ``.plan``, ``.store``, ``.analyze``, ``.render``) stay torch-free.
Every registry imports its plugins before its first lookup (the model families, one paper's encoders).
"""
from __future__ import annotations

import importlib
from typing import Any, List

from zoo import build as _build_module  # torch-free; bound now so ``zoo.build`` stays the function below
from zoo._names import normalize_name

from zoo._version import __version__  # noqa: E402  (a leaf: model files record it without importing zoo)
from zoo import _pyg_compat

_pyg_compat.install()  # PyG without its torch._dynamo import (zoo/_pyg_compat.py)

#: public name -> the module that defines it (imported, with the model families, on first use)
_LAZY = {
    "Graph": "zoo.graph", "as_graph": "zoo.graph",
    "apply_init": "zoo.inits", "list_inits": "zoo.inits", "register_init": "zoo.inits",
    "list_norms": "zoo.norms", "register_norm": "zoo.norms",
    "list_models": "zoo.registry", "list_presets": "zoo.registry", "model_card": "zoo.registry",
    "register_model": "zoo.registry",
    # the training machinery, loaded on first use (nothing imported by zoo imports it: no cycle)
    "fit": "zoo.fitting", "save": "zoo.model_file", "load": "zoo.loading", "diagnose": "zoo.diagnosing",
}
#: ``zoo.build`` is the function (the module ``zoo.build`` stays in ``sys.modules``)
build = _build_module.build
_SUBPACKAGES = ("datasets", "diagnostics", "bench", "models", "nn", "inits", "norms", "registry", "graph",
                "papers", "ops", "trainer", "callbacks", "model_file")

__all__ = [
    "build", "register_model", "list_models", "list_presets", "model_card",
    "register_init", "list_inits", "apply_init", "register_norm", "list_norms",
    "Graph", "as_graph", "normalize_name", "list_datasets", "__version__", "fit", "save", "load", "diagnose",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"zoo.{name}")
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


def list_datasets() -> Any:
    """Dataset names with sizes, sources and local availability (see :mod:`zoo.datasets`)."""
    return importlib.import_module("zoo.datasets").list_datasets()
