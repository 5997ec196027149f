"""Logger callbacks: every evaluated epoch's metrics written where a researcher's tools read them."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional, Union

__all__ = ["CSVLogger"]

KEYS = ("train", "val", "test", "train_loss", "val_loss")


class CSVLogger:
    """``zoo.fit(..., callbacks=[CSVLogger("fit.csv")])``: one row per evaluated epoch and replica
    (``epoch, replica, train, val, test, train_loss, val_loss``), flushed every epoch so a
    running fit can be followed (``pandas.read_csv``); an existing file is replaced."""

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        self._fh: Optional[Any] = None
        self._writer: Optional[Any] = None

    def on_epoch_end(self, state: Any) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w", newline="")
            self._writer = csv.writer(self._fh)
            self._writer.writerow(["epoch", "replica", *KEYS])
        values = {k: state.metrics[k].tolist() for k in KEYS}
        for r, label in enumerate(state.labels):
            self._writer.writerow([int(state.epoch), label, *(repr(float(values[k][r])) for k in KEYS)])
        self._fh.flush()

    def on_fit_end(self, state: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
