"""Plots of the oversmoothing diagnostics (matplotlib, imported on use): energy against layer on
log-log axes (Fig. 1 of the nonlocal-MP paper) and the inter-layer similarity matrix (Fig. 2)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

__all__ = ["plot_energy_trace", "plot_similarity_matrix"]


def _labelled_traces(traces: Union[Tensor, Sequence[Any], Dict[Any, Any]]) -> List[Tuple[Optional[str], Tensor]]:
    """``(label, 1-D trace)`` pairs: a dict gives its keys as labels, a 2-D tensor / list of traces
    one line per row (``trace 0``, ``trace 1``...), a single trace one unlabelled line."""
    if isinstance(traces, dict):
        return [(str(label), torch.as_tensor(t, dtype=torch.float64).flatten()) for label, t in traces.items()]
    t = torch.as_tensor(traces, dtype=torch.float64)
    if t.dim() == 2 and t.size(0) > 1:
        return [(f"trace {i}", row) for i, row in enumerate(t)]
    return [(None, t.flatten())]


def plot_energy_trace(traces: Union[Tensor, Sequence[float], Dict[str, Any]], ax: Optional[Any] = None,
                      ylabel: str = "Laplacian energy", first_layer: int = 1, title: str = "") -> Any:
    """Energy vs layer ``k`` on log-log axes; ``traces`` is one trace, several (a 2-D tensor or a
    list of traces, one per row) or ``{label: trace}``.  Several traces get a legend; a single one
    none.  Returns the matplotlib ``Axes``."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.5))
    items = _labelled_traces(traces)
    for label, e in items:
        layers = torch.arange(first_layer, first_layer + e.numel()).numpy()
        ax.loglog(layers, e.numpy(), marker="o" if e.numel() == 1 else None, label=label)
    ax.set_xlabel(f"layer k (first = {first_layer})" if first_layer != 1 else "layer k")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(items) > 1 or items[0][0] is not None:
        ax.legend()
    return ax


def plot_similarity_matrix(matrix: Tensor, ax: Optional[Any] = None, title: str = "") -> Any:
    """Heat map of an ``(L, L)`` inter-layer cosine-similarity matrix (layers from 1).
    Returns the matplotlib ``Axes``."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4))
    m = torch.as_tensor(matrix, dtype=torch.float64).numpy()
    L = m.shape[0]
    image = ax.imshow(m, vmin=-1, vmax=1, cmap="RdBu_r", origin="lower", extent=(0.5, L + 0.5, 0.5, L + 0.5))
    ax.figure.colorbar(image, ax=ax, label="cosine similarity")
    ax.set_xlabel("layer t")
    ax.set_ylabel("layer s")
    if title:
        ax.set_title(title)
    return ax
