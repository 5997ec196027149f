"""A :class:`~zoo.trainer.history.History` as a pandas DataFrame and as a matplotlib figure."""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["history_frame", "plot_history"]

KEYS = ("train", "val", "test", "train_loss", "val_loss")


def history_frame(history: Any) -> Any:
    """Long ("tidy") format: one row per evaluated epoch and replica, columns ``epoch``,
    ``replica`` (its label), ``seed``, ``init`` and the metrics (nan after a replica stopped)."""
    import pandas as pd

    rows = []
    for t, epoch in enumerate(history.epochs):
        for r, label in enumerate(history.labels):
            rows.append({"epoch": int(epoch), "replica": label, "seed": history.seeds[r], "init": history.inits[r],
                         **{k: float(history.metrics[k][t, r]) for k in KEYS if k in history.metrics}})
    return pd.DataFrame(rows, columns=["epoch", "replica", "seed", "init", *[k for k in KEYS if k in history.metrics]])


def plot_history(history: Any, metric: str = "val", ax: Optional[Any] = None) -> Any:
    """One line per replica of ``metric`` over the epochs, its selected epoch marked; returns the axes."""
    if metric not in history.metrics:
        raise ValueError(f"metric must be one of {', '.join(history.metrics)}, got {metric!r}")
    import matplotlib.pyplot as plt

    ax = ax if ax is not None else plt.subplots(figsize=(6, 3.5))[1]
    for r, label in enumerate(history.labels):
        line, = ax.plot(history.epochs, history.metrics[metric][:, r], label=label)
        best = history.best_epoch[r]
        if best is not None and best in list(history.epochs):
            t = list(history.epochs).index(best)
            ax.plot([best], [history.metrics[metric][t, r]], "o", color=line.get_color())
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.legend(fontsize="small")
    return ax
