"""What ``zoo.fit`` returns: per-epoch metrics per replica, the selected epochs, the final
metrics, and the trained models on request (unstacked, one ``nn.Module`` per replica)."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn

from zoo.inits import INITS
from zoo.trainer.frames import history_frame, plot_history

__all__ = ["History", "MetricsRecorder"]


class MetricsRecorder:
    """The callback ``zoo.fit`` always adds: every evaluated epoch's metrics of every replica
    (nan for a replica from the epoch after it stopped: its state is frozen from then on).

    It keeps the device tensors and reads them once, when :attr:`rows` is first asked for, so it
    does not make the loop read the host every epoch (``syncs_host = False``): the loop then runs
    past the last replica's stop to its next check, and those epochs, where no replica ran, are
    left out.
    """

    KEYS = ("train", "val", "test", "train_loss", "val_loss")
    syncs_host = False

    def __init__(self) -> None:
        self.epochs: List[int] = []
        self._values: List[Tensor] = []  # (5, R) float64 per epoch
        self._active: List[Tensor] = []  # (R,) replicas that go on after the epoch
        self._rows: Optional[Dict[str, List[List[float]]]] = None

    def on_epoch_end(self, state: Any) -> None:
        self.epochs.append(int(state.epoch))
        self._values.append(torch.stack([state.metrics[k].detach().to(torch.float64) for k in self.KEYS]))
        self._active.append(state.active.clone())
        self._rows = None

    def state_dict(self) -> Dict[str, Any]:
        """The epochs recorded so far (saved with the loop's resume state: a resumed run's rows are
        those of an uninterrupted one)."""
        return {"epochs": list(self.epochs), "values": list(self._values), "active": list(self._active)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.epochs = list(state["epochs"])
        self._values, self._active = list(state["values"]), list(state["active"])
        self._rows = None

    @property
    def rows(self) -> Dict[str, List[List[float]]]:
        """``rows[key][t][r]``: the metric of replica ``r`` at the ``t``-th epoch (reads the device)."""
        if self._rows is None:
            self._rows = self._read()
        return self._rows

    def _read(self) -> Dict[str, List[List[float]]]:
        rows: Dict[str, List[List[float]]] = {k: [] for k in self.KEYS}
        if not self._values:
            return rows
        values = torch.stack(self._values).tolist()
        active = torch.stack(self._active).tolist()
        running = [True] * len(active[0])
        kept = 0
        for t, epoch_values in enumerate(values):
            if not any(running):  # the loop ran on to its host check; no replica trained
                break
            for k, per_replica in zip(self.KEYS, epoch_values):
                rows[k].append([v if running[r] else math.nan for r, v in enumerate(per_replica)])
            running = active[t]
            kept += 1
        del self.epochs[kept:]
        return rows


@dataclass
class History:
    """The outcome of ``zoo.fit`` for ``R`` replicas (``labels[r]``, e.g. ``"seed=0 init=bal_o"``).

    * ``epochs`` ``(T,)`` and ``metrics[key]`` ``(T, R)`` numpy arrays, key in ``train`` / ``val``
      / ``test`` (the task's metric) / ``train_loss`` / ``val_loss``; nan after a replica stopped;
    * ``best_epoch[r]``: the selected epoch (the runner's selection rule, ``select``);
    * ``final[r]``: the metrics at the selected epoch (what ``zoo bench`` records), with
      ``stop_reason``, ``epochs_run``, ``diverged``;
    * :meth:`model` / :meth:`models`: the trained models, ``which = "best"`` (selected) or ``"last"``.
    """

    labels: List[str]
    seeds: List[int]
    inits: List[str]
    epochs: Any
    metrics: Dict[str, Any]
    best_epoch: List[Optional[int]]
    final: List[Dict[str, Any]]
    results: List[Any] = field(repr=False)
    cells: List[Any] = field(repr=False)
    config: Dict[str, Any] = field(repr=False, default_factory=dict)
    wall_time_s: float = 0.0
    _base: Optional[nn.Module] = field(default=None, repr=False)
    _last: Optional[List[Dict[str, Tensor]]] = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return len(self.labels)

    def _index(self, replica: Any) -> int:
        if isinstance(replica, str):
            if replica in self.labels:
                return self.labels.index(replica)
            found = [r for r in range(self.size) if self._matches(r, replica)]
            if len(found) != 1:
                raise KeyError(f"{'no' if not found else 'several'} replica(s) {replica!r}; replicas: {self.labels}")
            return found[0]
        if isinstance(replica, bool) or not isinstance(replica, int) or not 0 <= replica < self.size:
            raise IndexError(f"replica must be 0..{self.size - 1} or one of {self.labels}, got {replica!r}")
        return replica

    def _matches(self, r: int, label: str) -> bool:
        """Whether ``label`` (``"seed=0 init=bal_o"``: any of the two, inits by any alias) names replica ``r``."""
        for part in label.split():
            key, _, value = part.partition("=")
            try:
                if key == "seed" and int(value) == self.seeds[r]:
                    continue
                if key == "init" and INITS.canonical(value) == INITS.canonical(self.inits[r]):
                    continue
            except ValueError:  # not a number / not an init name
                pass
            return False
        return True

    def state(self, replica: Any = 0, which: str = "best") -> Dict[str, Tensor]:
        """Replica ``replica``'s parameters (a ``state_dict`` of its trained model)."""
        r = self._index(replica)
        if which == "best":
            state = self.results[r].best_state
            if state is None:
                raise ValueError(f"replica {self.labels[r]!r} has no selected state (it diverged at epoch 0?); "
                                 "use which='last'")
            return state
        if which == "last":
            assert self._last is not None
            return self._last[r]
        raise ValueError(f"which must be 'best' (the selected epoch) or 'last', got {which!r}")

    def model(self, replica: Any = 0, which: str = "best") -> nn.Module:
        """Replica ``replica`` (index or label) as an ordinary module holding its trained weights
        (``which``: ``"best"``, the selected epoch, or ``"last"``), in eval mode; ``zoo.save`` takes it."""
        r = self._index(replica)
        if self._base is None:
            raise ValueError("this History holds no models (zoo.fit(..., keep_models=False))")
        model = copy.deepcopy(self._base)
        state = self.state(r, which)
        own = dict(model.named_parameters())
        with torch.no_grad():
            for name, value in state.items():
                own[name].copy_(value)
        gnn = getattr(model, "gnn", model)
        if isinstance(getattr(gnn, "build_config", None), dict):
            gnn.build_config = {**gnn.build_config, "init": self.inits[r],
                                "init_kwargs": dict(self.cells[r].config["model"]["init_kwargs"] or {})}
        return model.eval()

    def models(self, which: str = "best") -> List[nn.Module]:
        """Every replica's trained model (see :meth:`model`)."""
        return [self.model(r, which) for r in range(self.size)]

    def to_dataframe(self) -> Any:
        """The per-epoch metrics as a pandas DataFrame, one row per epoch and replica
        (:func:`zoo.trainer.frames.history_frame`; needs pandas)."""
        return history_frame(self)

    def plot(self, metric: str = "val", ax: Any = None) -> Any:
        """``metric`` over the epochs, a line per replica with its selected epoch marked; returns the
        matplotlib axes (:func:`zoo.trainer.frames.plot_history`)."""
        return plot_history(self, metric, ax)

    def summary(self) -> str:
        """One line per replica: selected epoch and metrics."""
        lines = []
        for label, best, fin in zip(self.labels, self.best_epoch, self.final):
            m = " ".join(f"{k} {fin[k]:.4f}" for k in ("train", "val", "test") if fin.get(k) is not None)
            lines.append(f"{label}: best epoch {best}, {m} ({fin['stop_reason']})")
        return "\n".join(lines)
