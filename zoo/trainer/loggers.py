"""Logger callbacks: every evaluated epoch's metrics written where a researcher's tools read them.

:class:`CSVLogger` needs nothing; :class:`TensorBoardLogger` and :class:`MLflowLogger` need their
package (the ``tensorboard`` / ``mlflow`` extras of ``pip install gat-zoo[...]``), imported when
the logger is made, so a missing one is one line before the fit starts.

The three name a value the same way: a metric (``train, val, test, train_loss, val_loss``) of a
replica (``zoo.fit``'s label, ``seed=0 init=xavier``).  The CSV file has a ``replica`` column;
TensorBoard and MLflow take one name per series, ``{metric}/{replica}`` with the replica's label
written in the characters both accept (:func:`replica_name`: ``val/seed_0_init_xavier``), so
TensorBoard shows one section per metric with a chart per replica.
"""
from __future__ import annotations

import csv
import importlib
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from zoo._io import output_file, user_path

__all__ = ["CSVLogger", "TensorBoardLogger", "MLflowLogger", "replica_name"]

KEYS = ("train", "val", "test", "train_loss", "val_loss")


def replica_name(label: str) -> str:
    """A replica's label in the characters TensorBoard tags and MLflow metric names both accept
    (letters, digits, ``_ . -``): ``seed=0 init=xavier`` -> ``seed_0_init_xavier``."""
    return re.sub(r"[^\w.\-]+", "_", str(label)).strip("_") or "replica"


def _values(state: Any) -> List[Tuple[str, Dict[str, float]]]:
    """``(replica label, {metric: value})`` per replica of an evaluated epoch."""
    lists = {k: state.metrics[k].tolist() for k in KEYS}
    return [(label, {k: float(lists[k][r]) for k in KEYS}) for r, label in enumerate(state.labels)]


def _require(module: str, logger: str, extra: str) -> Any:
    """``module`` imported, or one ImportError line naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        reason = " ".join(str(e).split())  # one line, whatever the package's message
        raise ImportError(f"{logger} needs the {extra} package (import {module}: {reason}); install it with "
                          f"pip install 'gat-zoo[{extra}]'") from None


class CSVLogger:
    """``zoo.fit(..., callbacks=[CSVLogger("fit.csv")])``: one row per evaluated epoch and replica
    (``epoch, replica, train, val, test, train_loss, val_loss``), flushed every epoch so a
    running fit can be followed (``pandas.read_csv``); an existing file is replaced, an existing
    folder gets ``fit.csv`` inside it."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = output_file(path, "fit.csv", make=False)  # a path below a file fails here, not at epoch 1
        self._fh: Optional[Any] = None
        self._writer: Optional[Any] = None

    def on_epoch_end(self, state: Any) -> None:
        if self._fh is None:
            self.path = output_file(self.path, "fit.csv")
            self._fh = open(self.path, "w", newline="")
            self._writer = csv.writer(self._fh)
            self._writer.writerow(["epoch", "replica", *KEYS])
        for label, values in _values(state):
            self._writer.writerow([int(state.epoch), label, *(repr(values[k]) for k in KEYS)])
        self._fh.flush()

    def on_fit_end(self, state: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class TensorBoardLogger:
    """``zoo.fit(..., callbacks=[TensorBoardLogger("runs/fit")])``: TensorBoard event files in
    ``log_dir`` (``torch.utils.tensorboard.SummaryWriter``), a scalar ``{metric}/{replica}`` per
    evaluated epoch (step = epoch), flushed every epoch; ``tensorboard --logdir runs`` shows them.
    Needs the ``tensorboard`` extra."""

    def __init__(self, log_dir: Union[str, Path]) -> None:
        self.log_dir = user_path(log_dir)
        self._summary_writer = _require("torch.utils.tensorboard", "TensorBoardLogger", "tensorboard").SummaryWriter
        self._writer: Optional[Any] = None

    def on_epoch_end(self, state: Any) -> None:
        if self._writer is None:
            self._writer = self._summary_writer(log_dir=str(self.log_dir))
        epoch = int(state.epoch)
        for label, values in _values(state):
            name = replica_name(label)
            for key in KEYS:
                self._writer.add_scalar(f"{key}/{name}", values[key], epoch)
        self._writer.flush()

    def on_fit_end(self, state: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class MLflowLogger:
    """``zoo.fit(..., callbacks=[MLflowLogger(params={...})])``: one MLflow run per fit, a metric
    ``{metric}/{replica}`` per evaluated epoch (step = epoch), the model's build options and the
    replicas' labels as params (plus ``params``), ended FINISHED when the fit ends (a second fit
    with the same logger is a second run).

    ``tracking_uri``: default MLflow's own (``MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``
    in the working directory; ``mlflow ui`` reads it); ``experiment`` is made when missing.  The
    run's id is ``run_id`` once the first epoch is logged.  Needs the ``mlflow`` extra
    (``mlflow-skinny`` with SQLAlchemy and Alembic for the local SQLite store).
    """

    def __init__(self, tracking_uri: Optional[str] = None, experiment: str = "zoo", run_name: Optional[str] = None,
                 params: Optional[Mapping[str, Any]] = None) -> None:
        tracking = _require("mlflow.tracking", "MLflowLogger", "mlflow")
        self._entities = _require("mlflow.entities", "MLflowLogger", "mlflow")
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.params = dict(params or {})
        self._client_class = tracking.MlflowClient
        self._client: Optional[Any] = None
        self.run_id: Optional[str] = None

    def _start(self, state: Any) -> None:
        self._client = client = self._client_class(tracking_uri=self.tracking_uri)
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(self.experiment)
        self.run_id = client.create_run(experiment_id, run_name=self.run_name).info.run_id
        params = {**_model_params(state.base), "replicas": ", ".join(state.labels), **self.params}
        client.log_batch(self.run_id, params=[self._entities.Param(str(k), str(v)[:6000]) for k, v in params.items()])

    def on_epoch_end(self, state: Any) -> None:
        if self._client is None:
            self._start(state)
        now, epoch = int(time.time() * 1000), int(state.epoch)
        metrics = [self._entities.Metric(f"{key}/{replica_name(label)}", values[key], now, epoch)
                   for label, values in _values(state) for key in KEYS]
        for i in range(0, len(metrics), 1000):  # MLflow's limit per batch
            self._client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def on_fit_end(self, state: Any) -> None:
        if self._client is not None and self.run_id is not None:
            self._client.set_terminated(self.run_id, "FINISHED")
        self._client = None  # another fit with this logger is another run


def _model_params(model: Any) -> Dict[str, Any]:
    """A zoo model's build options (``zoo.build``'s ``build_config``) without the init, which is
    per replica (in the labels); ``{}`` for a model built otherwise."""
    config = getattr(model, "build_config", None) or {}
    return {f"model.{k}": v for k, v in config.items() if k not in ("init", "init_kwargs") and v is not None}
