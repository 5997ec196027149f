"""zoo bench --save-weights: each run's selected (or last) state beside its record; zoo.load finds it."""
from __future__ import annotations


import pytest
import torch

import zoo
from zoo.bench.store import records
from zoo.bench.store.weights import find_weights
from zoo.cli import main

ARGS = ["--where", "dataset=cornell", "--quiet", "--no-leaderboard"]


def _suite(tmp_path, select="val_metric"):
    path = tmp_path / "s.toml"
    path.write_text(f"""
[suite]
name = "weights"
[defaults]
dataset = "cornell"
model = "gat"
num_layers = 2
hidden_dim = 8
epochs = 4
optimizer = "adam"
lr = 0.05
dtype = "float64"
select = "{select}"
[grid]
seed = [0, 1]
init = ["xavier", "bal_o"]
""")
    return str(path)


def _test_accuracy(model, data):
    model.eval()
    with torch.no_grad():
        pred = model(data.edge_index, data.x.double()).argmax(-1)
    return float((pred[data.test_mask] == data.y[data.test_mask]).double().mean())


@pytest.mark.parametrize("which", ["best", "last"])
def test_saved_weights_reproduce_the_records(tmp_path, which):
    out = tmp_path / "out"
    assert main(["bench", _suite(tmp_path), "--out", str(out), "--save-weights", which, *ARGS]) == 0
    recs = records.read_records(out / records.RESULTS_FILE)
    assert len(recs) == 4 and all(r["weights"] == f"weights/{r['id']}.safetensors" for r in recs)
    assert all(r["weights_bytes"] == (out / r["weights"]).stat().st_size for r in recs)
    from zoo.datasets import load

    data = load("cornell").data
    for rec in recs:
        model = zoo.load(out, cell=rec["id"][:8], seed=rec["seed"])
        assert model.build_config["init"] == rec["config"]["model"]["init"]
        extra = model.saved_header["extra"]
        assert extra["cell"] == rec["id"] and extra["which"] == which
        if which == "best":  # the selected state: the record's test accuracy
            assert extra["epoch"] == rec["epochs_to_best"]
            assert _test_accuracy(model, data) == pytest.approx(rec["metrics"]["test"], abs=1e-12)


def test_save_weights_is_off_by_default_and_find_weights_says_why(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", _suite(tmp_path), "--out", str(out), *ARGS]) == 0
    assert not (out / "weights").exists()
    assert all("weights" not in r for r in records.read_records(out / records.RESULTS_FILE))
    with pytest.raises(ValueError, match="no saved weights: run the suite with --save-weights"):
        zoo.load(out, seed=0)


def test_find_weights_needs_one_run(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", _suite(tmp_path), "--out", str(out), "--save-weights", "best", *ARGS]) == 0
    with pytest.raises(ValueError, match="4 runs match"):
        find_weights(out)
    with pytest.raises(ValueError, match="2 runs match"):
        find_weights(out, seed=1)
    with pytest.raises(ValueError, match="no run matches"):
        find_weights(out, cell="zzz")
    rec = records.read_records(out / records.RESULTS_FILE)[0]
    assert find_weights(out, cell=rec["id"]) == out / rec["weights"]
    with pytest.raises(ValueError, match="cell= and seed= pick a run in a results folder"):
        zoo.load(out / rec["weights"], seed=0)


def test_diagnose_a_run_of_a_results_folder(tmp_path):
    """zoo diagnose OUT --cell --seed: the run's own dataset and precision, from its saved weights."""
    out = tmp_path / "out"
    assert main(["bench", _suite(tmp_path), "--out", str(out), "--save-weights", "best", *ARGS]) == 0
    rec = [r for r in records.read_records(out / records.RESULTS_FILE) if r["config"]["model"]["init"] != "xavier"][0]
    d = zoo.diagnose(out, cell=rec["id"][:8], seed=rec["seed"], epochs=0)
    assert d.history.config["task"]["dataset"] == "cornell" and d.history.config["run"]["dtype"] == "float64"
    assert d.data["train"][0, 0] == pytest.approx(rec["metrics"]["train"], abs=1e-12)  # the selected state, as saved
    page = tmp_path / "p.html"
    assert main(["diagnose", str(out), "--cell", rec["id"][:8], "--seed", str(rec["seed"]), "--epochs", "1",
                 "--out", str(page)]) == 0 and page.is_file()
