"""gat-zoo: a model zoo for deep graph attention networks.

>>> import zoo
>>> model = zoo.build("gatv2", in_dim=1433, out_dim=7, num_layers=10, init="bal_o")
>>> out = model(edge_index, x)             # also a PyG Data or a dgl.DGLGraph

The public names load on first use (PEP 562): ``import zoo`` itself imports no torch, so the
torch-free layers (``zoo.bench.suite``, ``.plan``, ``.store``, ``.analyze``, ``.render``) stay torch-free.
The first model-side name (``zoo.build``, ``zoo.list_models``...) registers every model family.
"""
from __future__ import annotations

import functools
import importlib
from typing import Any, List

from zoo import build as _build_module  # torch-free; bound now so ``zoo.build`` stays the function below
from zoo._names import normalize_name

from zoo._version import __version__  # noqa: E402  (a leaf: model files record it without importing zoo)

#: public name -> the module that defines it (imported, with the model families, on first use)
_LAZY = {
    "Graph": "zoo.graph", "as_graph": "zoo.graph",
    "apply_init": "zoo.inits", "list_inits": "zoo.inits", "register_init": "zoo.inits",
    "list_norms": "zoo.norms", "register_norm": "zoo.norms",
    "list_models": "zoo.registry", "list_presets": "zoo.registry", "model_card": "zoo.registry",
    "register_model": "zoo.registry",
    # the training machinery, loaded on first use (nothing imported by zoo imports it: no cycle)
    "fit": "zoo.fitting", "save": "zoo.model_file", "load": "zoo.model_file",
    "diagnose": "zoo.diagnostics.diagnose",
}
_SUBPACKAGES = ("datasets", "diagnostics", "bench", "models", "nn", "inits", "norms", "registry", "graph",
                "papers", "ops", "trainer", "callbacks", "model_file")
#: importing these registers every model family and one paper's encoders and heads (and loads torch)
_PLUGIN_MODULES = ("zoo.models", "zoo.papers")

__all__ = [
    "build", "register_model", "list_models", "list_presets", "model_card",
    "register_init", "list_inits", "apply_init", "register_norm", "list_norms",
    "Graph", "as_graph", "normalize_name", "list_datasets", "__version__", "fit", "save", "load", "diagnose",
]


def _register_plugins() -> None:
    for module in _PLUGIN_MODULES:
        importlib.import_module(module)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        _register_plugins()  # registers the model families before any lookup
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    if name in _SUBPACKAGES:
        if name == "registry":
            _register_plugins()  # the registry is read with its families registered
        return importlib.import_module(f"zoo.{name}")
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))


@functools.wraps(_build_module.build)
def build(*args: Any, **kwargs: Any) -> Any:
    _register_plugins()  # the registry is read with its families registered
    return _build_module.build(*args, **kwargs)


def list_datasets() -> Any:
    """Dataset names with sizes, sources and local availability (see :mod:`zoo.datasets`)."""
    return importlib.import_module("zoo.datasets").list_datasets()
