"""``zoo.load``: a model from a model file (:mod:`zoo.model_file`), or a run's model from a ``zoo bench``
results folder (the run's file, kept by ``--save-weights``, found by :mod:`zoo.bench.store.weights`).

It sits above both: the model file is the model side's, the results folder the benchmark side's.
"""
from __future__ import annotations

from typing import Any, Optional

from torch import nn

from zoo._io import user_path
from zoo.bench.store.weights import find_weights
from zoo.model_file import PathLike, load as load_file

__all__ = ["load"]


def load(path: PathLike, *, device: Any = None, cell: Optional[str] = None, seed: Optional[int] = None) -> nn.Module:
    """Rebuild the model saved at ``path`` by ``zoo.save`` (or kept by ``zoo bench --save-weights``)
    and load its weights; ``device`` moves it (default: the CPU).

    ``path`` is a model file, or a ``zoo bench`` results folder together with ``cell``
    (a cell id or its unique prefix) and ``seed``.  The model is returned in training mode, as
    ``zoo.build`` returns it: call ``.eval()`` before evaluating.  The file's header is on
    ``model.saved_header`` (a dict).
    """
    path = user_path(path)
    if path.is_dir() and not ((path / "model.safetensors").is_file() and cell is None and seed is None):
        path = find_weights(path, cell=cell, seed=seed)
    elif cell is not None or seed is not None:
        raise ValueError(f"cell= and seed= pick a run in a results folder, but {path} is a file; pass the folder")
    return load_file(path, device=device)
