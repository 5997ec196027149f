"""History as a DataFrame and a plot; the CSV logger callback writes what History holds."""
from __future__ import annotations

import math

import matplotlib
import pandas as pd
import pytest

import zoo
from zoo.trainer.loggers import CSVLogger

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "fit.csv"
    history = zoo.fit("gat", "cornell", inits=["xavier", "bal_o"], seeds=[0], num_layers=2, hidden_dim=8, epochs=4,
                      keep_models=False, callbacks=[CSVLogger(path)])
    return history, path


def test_to_dataframe_is_one_row_per_epoch_and_replica(fitted):
    history, _ = fitted
    frame = history.to_dataframe()
    assert len(frame) == len(history.epochs) * history.size
    assert list(frame.columns[:4]) == ["epoch", "replica", "seed", "init"]
    one = frame[(frame.epoch == 2) & (frame.init == "balanced_orthogonal")]
    assert one["val"].item() == history.metrics["val"][2, 1]


def test_plot_draws_a_line_per_replica(fitted):
    history, _ = fitted
    ax = history.plot("val_loss")
    assert ax.get_ylabel() == "val_loss" and len(ax.get_legend().get_texts()) == history.size
    with pytest.raises(ValueError, match="metric must be one of"):
        history.plot("accuracy")


def test_the_csv_log_holds_the_histories_numbers(fitted):
    history, path = fitted
    log = pd.read_csv(path)
    frame = history.to_dataframe()
    assert list(log.columns) == ["epoch", "replica", "train", "val", "test", "train_loss", "val_loss"]
    assert len(log) == len(frame)
    for key in ("val", "train_loss"):
        for a, b in zip(log[key], frame[key]):
            assert (math.isnan(a) and math.isnan(b)) or a == b
