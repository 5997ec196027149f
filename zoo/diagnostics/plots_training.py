"""Matplotlib plots of the trainability diagnostics (balance paper Figs. 3b, 4b, 5, 8).

matplotlib is imported on first use, so ``zoo.diagnostics`` stays cheap to import.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

__all__ = ["plot_relative_grad_norms", "plot_change_fractions"]


def _history(source: Any) -> List[Dict[str, Any]]:
    history = getattr(source, "history", source)
    if not isinstance(history, Sequence) or not history:
        raise ValueError("pass a ConservationRecorder (or its history) with at least one record")
    return list(history)


def plot_relative_grad_norms(source: Any, kind: str = "features", layers: Optional[Sequence[int]] = None,
                             ax: Any = None, log: bool = True, title: Optional[str] = None):
    """Relative gradient norms per layer over epochs (Figs. 3b/4b: ``kind="features"``; Fig. 5 also
    ``"attention"``).  ``source`` is a :class:`ConservationRecorder` or its ``history``; ``layers``
    are 0-based indices (default all).  Returns the figure."""
    import matplotlib.pyplot as plt

    if kind not in ("features", "attention"):
        raise ValueError(f"kind must be 'features' or 'attention', got {kind!r}")
    history = _history(source)
    epochs = [r["epoch"] for r in history]
    num_layers = len(history[0][kind])
    chosen = range(num_layers) if layers is None else layers
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    else:
        fig = ax.figure
    cmap = plt.get_cmap("viridis", max(num_layers, 2))
    for index in chosen:
        ax.plot(epochs, [r[kind][index] for r in history], color=cmap(index), label=f"l={index + 1}")
    if log:
        ax.set_yscale("log")
    symbol = "W" if kind == "features" else "a"
    ax.set_xlabel("epoch")
    ax.set_ylabel(rf"$\|\nabla {symbol}^l\| / \|{symbol}^l\|$")
    ax.legend(fontsize="small", ncol=2)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_change_fractions(changes: Mapping[str, List[Dict[str, float]]], kind: str = "features",
                          ax: Any = None, title: Optional[str] = None):
    """Grouped bars per layer: for each run label (e.g. an init name), the fraction of changed
    parameters from :func:`parameter_change` (Figs. 3a/4a: ``"features"``; attention: ``"attention"``)."""
    import matplotlib.pyplot as plt
    import numpy as np

    if not changes:
        raise ValueError("pass {label: parameter_change(...)} with at least one run")
    labels = list(changes)
    num_layers = max(len(v) for v in changes.values())
    width = 0.8 / len(labels)
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(5, num_layers * 0.6), 3.5))
    else:
        fig = ax.figure
    x = np.arange(num_layers)
    for k, label in enumerate(labels):
        values = [row[kind] for row in changes[label]]
        ax.bar(x[:len(values)] + (k - (len(labels) - 1) / 2) * width, np.nan_to_num(values), width, label=label)
    ax.set_xticks(x, [str(i + 1) for i in x])
    ax.set_xlabel("layer")
    ax.set_ylabel(f"fraction of changed {'W' if kind == 'features' else 'a'}")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
