"""Mode energy_at_init with ``energy_forward``: the energy of the untrained model measured in eval
mode (the default, dropout off) or in training mode (dropout on, as a freshly built module is);
in training mode each run's masks come from its own seed, whatever else its group holds."""
from __future__ import annotations

import copy

import pytest

from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.store.records import read_records
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import SuiteError

SUITE = {
    "suite": {"name": "tiny_energy", "title": "energy_forward test", "mode": "energy_at_init"},
    "defaults": {"dataset": "gate_synthetic", "setting": 27, "num_nodes": 120, "num_layers": 2, "hidden_dim": 8,
                 "epochs": 0, "dtype": "float64", "model": "san_pre_ln", "input_dropout": 0.5},
    "grid": {"variant": ["eval", "train"], "seed": [0, 1]},
    "variants": {"eval": {}, "train": {"energy_forward": "train"}},
    "leaderboard": {"rows": ["variant"], "columns": "num_layers", "metric": "laplacian_energy"},
}


def _energies(raw, out):
    run_suite(parse_suite(raw), out, RunOptions(device="cpu", quiet=True))
    return {(r["config"]["run"]["variant"], r["config"]["run"]["seed"]): r["metrics"]["laplacian_energy"]
            for r in read_records(out)}


def test_training_mode_draws_dropout_and_eval_mode_does_not(tmp_path):
    got = _energies(SUITE, tmp_path / "r")
    for seed in (0, 1):
        assert got[("train", seed)] != pytest.approx(got[("eval", seed)], rel=1e-3)
    no_dropout = copy.deepcopy(SUITE)
    no_dropout["defaults"]["input_dropout"] = 0.0
    no_dropout["grid"]["variant"] = ["eval"]
    # eval mode ignores the dropout rate: the same energies as a model without dropout
    plain = _energies(no_dropout, tmp_path / "plain")
    assert plain[("eval", 0)] == pytest.approx(got[("eval", 0)], rel=1e-12)


def test_a_runs_masks_do_not_depend_on_its_group(tmp_path):
    both = _energies(SUITE, tmp_path / "both")
    alone = copy.deepcopy(SUITE)
    alone["grid"] = {"variant": ["train"], "seed": [1]}
    assert _energies(alone, tmp_path / "alone")[("train", 1)] == pytest.approx(both[("train", 1)], rel=1e-12)


def test_bad_energy_forward_is_refused_in_one_line():
    bad = copy.deepcopy(SUITE)
    bad["variants"]["train"] = {"energy_forward": "training"}
    with pytest.raises(SuiteError, match="energy_forward must be one of eval, train"):
        parse_suite(bad, validate_models=False)
    trains = copy.deepcopy(SUITE)
    trains["suite"]["mode"] = "train"
    trains["defaults"]["epochs"] = 1
    with pytest.raises(SuiteError, match="energy_forward applies to mode"):
        parse_suite(trains, validate_models=False)


def test_a_measured_group_skips_the_dry_run_and_measures_the_same(tmp_path, monkeypatch):
    """The energy mode builds its replicas without the dry-run forward (the measurement is the one
    forward it needs): the same energies, bitwise, as with it; a model with lazily shaped parameters
    (GATDB's xi) is still dry-run."""
    from zoo.trainer import cells, views

    calls = []
    original = views.TransductiveView.dry_run
    monkeypatch.setattr(views.TransductiveView, "dry_run", lambda self, model: calls.append(1) or original(self, model))
    fast = _energies(SUITE, tmp_path / "fast")
    assert calls == []
    build = cells.build_replicas
    monkeypatch.setattr(cells, "build_replicas", lambda *a, dry_run=True, **k: build(*a, dry_run=True, **k))
    assert _energies(SUITE, tmp_path / "dry") == fast
    assert len(calls) == 4
    lazy = copy.deepcopy(SUITE)
    lazy["defaults"].pop("input_dropout")
    lazy["defaults"]["model"] = "gatdb"
    lazy["grid"]["variant"] = ["eval"]
    monkeypatch.setattr(cells, "build_replicas", build)
    calls.clear()
    assert len(_energies(lazy, tmp_path / "lazy")) == 2 and len(calls) == 2
