"""gat-zoo: a model zoo for deep graph attention networks.

>>> import zoo
>>> model = zoo.build("gatv2", in_dim=1433, out_dim=7, num_layers=10, init="bal_o")
>>> out = model(edge_index, x)             # also a PyG Data or a dgl.DGLGraph
"""
from zoo._names import normalize_name
from zoo.build import build
from zoo.graph import Graph, as_graph
from zoo.inits import apply_init, list_inits, register_init
from zoo.norms import list_norms, register_norm
from zoo.registry import list_models, list_presets, model_card, register_model

from zoo import models as _models  # noqa: F401  (registers the model families)
from zoo import papers as _papers  # noqa: F401  (registers one paper's encoders and heads)

__version__ = "0.1.0"

__all__ = [
    "build", "register_model", "list_models", "list_presets", "model_card",
    "register_init", "list_inits", "apply_init", "register_norm", "list_norms",
    "Graph", "as_graph", "normalize_name", "__version__",
]


def __getattr__(name: str):
    # Heavier subpackages load on first use: ``zoo.datasets``, ``zoo.diagnostics``, ``zoo.bench``.
    if name in ("datasets", "diagnostics", "bench", "train"):
        import importlib

        return importlib.import_module(f"zoo.{name}")
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")


def list_datasets():
    """Dataset names with sizes, sources and local availability (see :mod:`zoo.datasets`)."""
    from zoo.datasets import list_datasets as _list

    return _list()
