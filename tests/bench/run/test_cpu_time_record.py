"""A CPU group's record carries the CPU time its process used (``group_cpu_time_s``), beside its wall
time; nothing else of the record, its id or its group changes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from zoo.bench.run.driver import _group_cpu_time, run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.store.records import read_records
from zoo.bench.suite.load import parse_suite

SUITE = {
    "suite": {"name": "cpu_time_test"},
    "defaults": {"dataset": "twin", "model": "gat", "num_layers": 1, "k": 3, "epochs": 5, "optimizer": "adam",
                 "lr": 0.01},
    "grid": {"hidden_dim": [8, 16], "seed": [0, 1]},
    "leaderboard": {"rows": ["model"], "columns": "hidden_dim", "metric": "test"},
}


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_cpu_records_carry_their_group_cpu_time(tmp_path, data_root):
    suite = parse_suite(SUITE)
    run_suite(suite, tmp_path / "out", RunOptions(device="cpu", quiet=True))
    recs = read_records(tmp_path / "out")
    assert sorted(r["id"] for r in recs) == sorted(c.id for c in suite.cells)
    by_group = {}
    for r in recs:
        assert r["group_cpu_time_s"] > 0 and "group_cpu_time_s" not in str(r["config"])
        by_group.setdefault(r["group"], set()).add(r["group_cpu_time_s"])
    assert len(by_group) == 2 and all(len(v) == 1 for v in by_group.values())  # one number per group


def test_group_cpu_time_is_cpu_only_and_adds_the_earlier_sittings():
    run = SimpleNamespace(cpu_started=0.0)
    cpu = torch.device("cpu")
    assert _group_cpu_time(run, {}, torch.device("cuda")) is None  # a GPU's cost is its wall time
    assert _group_cpu_time(run, {"resumed_at_epoch": 4}, cpu) is None  # earlier sittings' CPU time unknown
    resumed = _group_cpu_time(run, {"resumed_at_epoch": 4, "resumed_cpu_s": 1e6}, cpu)
    assert resumed >= 1e6 and resumed - 1e6 == pytest.approx(_group_cpu_time(run, {}, cpu), abs=1.0)
