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

from zoo._version import __version__  # noqa: E402

__all__ = [
    "build", "register_model", "list_models", "list_presets", "model_card",
    "register_init", "list_inits", "apply_init", "register_norm", "list_norms",
    "Graph", "as_graph", "normalize_name", "__version__", "save", "load", "fit", "diagnose",
]


def diagnose(model, dataset=None, **kwargs):
    """Train briefly (or load), record every layer's diagnostics and render the diagnose page;
    see :func:`zoo.diagnostics.diagnose.diagnose`."""
    from zoo.diagnostics.diagnose import diagnose as _diagnose

    return _diagnose(model, dataset, **kwargs)


def fit(model_or_name, task, **kwargs):
    """Train with the benchmark runner's protocol (seeds x inits stacked); returns a ``History``.
    Sets torch to one thread on the CPU during the fit, as the runner does; see :func:`zoo.trainer.fit`."""
    from zoo.trainer import fit as _fit

    return _fit(model_or_name, task, **kwargs)


def save(model, path, *, extra=None):
    """Write ``model``'s weights (safetensors) and build configuration to ``path``; see :func:`zoo.checkpoint.save`."""
    from zoo.checkpoint import save as _save

    return _save(model, path, extra=extra)


def load(path, *, device=None, cell=None, seed=None):
    """Rebuild a model saved by :func:`zoo.save` (or ``zoo bench --save-weights``); see :func:`zoo.checkpoint.load`."""
    from zoo.checkpoint import load as _load

    return _load(path, device=device, cell=cell, seed=seed)


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
