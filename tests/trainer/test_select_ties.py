"""``select_ties = "last"``: of several epochs with the best validation score, the later one is reported
(the nonlocal paper reports "the epoch with the highest validation accuracy" and names no tie rule)."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.bench.suite.load import parse_suite


def _task():
    from zoo.datasets import load

    return load("twin")


def _run(ties: str):
    task = _task()
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=60, loss_threshold=0.0, select_ties=ties)

    def factory():
        return zoo.build("gat", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8, num_layers=2)

    reps, view = build_replicas(task, [factory] * 2, [0, 1], torch.device("cpu"), torch.float64, cfg, True)
    return train_replicas(task, reps, view, cfg, [0, 1])


def test_last_tie_keeps_a_later_epoch_with_the_same_best_score():
    first, last = _run("first"), _run("last")
    for a, b in zip(first, last):
        assert b.metrics["val"] == a.metrics["val"]  # the same best score
        assert b.best_epoch >= a.best_epoch
    assert any(b.best_epoch > a.best_epoch for a, b in zip(first, last))  # the twin task plateaus


def test_select_ties_enters_a_cell_only_where_set():
    raw = {"suite": {"name": "t"}, "defaults": {"model": "gat", "dataset": "twin", "epochs": 2},
           "grid": {"seed": [0]}, "leaderboard": {"rows": ["model"], "columns": "seed", "metric": "test"}}
    plain = parse_suite(raw, validate_models=False).cells[0]
    assert "select_ties" not in plain.config["train"]  # the other suites' cell ids stay as they were
    tied = parse_suite(raw, validate_models=False, settings={"select_ties": "last"}).cells[0]
    assert tied.config["train"]["select_ties"] == "last" and tied.id != plain.id
    with pytest.raises(ValueError, match="select_ties must be 'first' or 'last'"):
        TrainConfig(select_ties="middle")
