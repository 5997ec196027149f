"""Mode train_attention: the training protocol, then the last state's self-attention alpha_vv
(metric self_attention) and per-layer alpha_vv / attention entropy (record fields); a finding may read
the metric on a test-accuracy board."""
from __future__ import annotations

import math

import pytest

from zoo.bench.report import findings as fd
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import parse_suite
from zoo.bench.store.records import read_records

SUITE = {
    "suite": {"name": "tiny_attention", "title": "train_attention test", "mode": "train_attention"},
    "defaults": {"dataset": "gate_synthetic", "setting": 26, "num_nodes": 120, "num_layers": 2, "hidden_dim": 8,
                 "epochs": 3, "optimizer": "adam", "lr": 0.01, "dtype": "float64", "init": "ll_orthogonal"},
    "grid": {"variant": ["gate", "gat"], "seed": [0, 1]},
    "variants": {"gate": {"model": "gate"}, "gat": {"model": "gatv2", "share_weights": False}},
    "leaderboard": {"rows": ["variant"], "columns": "num_layers", "metric": "test"},
}


def test_records_carry_the_self_attention(tmp_path):
    run_suite(parse_suite(SUITE), tmp_path / "r", RunOptions(device="cpu", quiet=True))
    records = read_records(tmp_path / "r")
    assert len(records) == 4
    for rec in records:
        per_layer = rec["self_attention_per_layer"]
        assert len(per_layer) == 2 and len(rec["attention_entropy_per_layer"]) == 2
        assert all(0 < a <= 1 for a in per_layer)
        assert math.isclose(rec["metrics"]["self_attention"], sum(per_layer) / 2, rel_tol=1e-12)
        assert 0 <= rec["metrics"]["test"] <= 1


def test_a_finding_may_read_self_attention_on_a_test_board():
    raw = [{"id": "x", "claim": "c", "source": "s", "quote": "q",
            "check": {"kind": "greater", "metric": "self_attention", "a": {"variant": "gate"}, "b": {"variant": "gat"}}}]
    f = fd.parse_findings(raw, "test")[0]
    assert fd.other_split(f, {"metric": "test"}) and not fd.other_split(f, {"metric": "laplacian_energy"})
    with pytest.raises(fd.FindingsError):
        bad = [{**raw[0], "check": {**raw[0]["check"], "metric": "entropy"}}]
        fd.validate(fd.parse_findings(bad, "test"), fd.skeleton(parse_suite(SUITE).resolved()), ("variant",), "test")
