"""Plots of the oversmoothing diagnostics (matplotlib, imported on use): energy against layer on
log-log axes (Fig. 1 of the nonlocal-MP paper) and the inter-layer similarity matrix (Fig. 2)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

import torch
from torch import Tensor

__all__ = ["plot_energy_trace", "plot_similarity_matrix"]


def plot_energy_trace(traces: Union[Tensor, Sequence[float], Dict[str, Any]], ax: Optional[Any] = None,
                      ylabel: str = "Laplacian energy", first_layer: int = 1) -> Any:
    """Energy vs layer ``k`` on log-log axes; ``traces`` is one trace or ``{label: trace}``.
    Returns the matplotlib ``Axes``."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.5))
    items = traces.items() if isinstance(traces, dict) else [(None, traces)]
    for label, trace in items:
        e = torch.as_tensor(trace, dtype=torch.float64)
        ax.loglog(torch.arange(first_layer, first_layer + e.numel()).numpy(), e.numpy(), label=label)
    ax.set_xlabel("layer k")
    ax.set_ylabel(ylabel)
    if isinstance(traces, dict):
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
