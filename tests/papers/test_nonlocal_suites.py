"""The nonlocal SAN paper's suites: Table 7 (accuracy: encoder dropout, optimizer, the splits a finding reads), the
energy tables (protocol, the nonlocal factor, log-log slopes) and the pruning table (256-layer numbers)."""
from __future__ import annotations

import json
import re

import pytest
import torch

import zoo
from tests.conftest import awkward_graph
from tests.papers.shipped import REPO, REPORTED, SUITES, finding, paper_text, reported, suite


def test_nonlocal_energy_suite_protocol():
    from zoo.bench.suite.load import load_suite

    suite = load_suite("nonlocal_energy", validate_models=False)
    seeds = {}
    for c in suite.cells:
        key = (c.config["task"]["dataset"], c.config["run"]["variant"], c.config["model"]["kwargs"]["num_layers"])
        seeds.setdefault(key, set()).add(c.seed)
        assert c.config["run"]["dtype"] == "float64"
    assert min(len(s) for s in seeds.values()) >= 10
    norms = {c.config["model"]["kwargs"].get("nonlocal_norm") for c in suite.cells
             if c.config["model"]["name"] == "san_nonlocal"}
    assert norms == {"n", "nd", "none", "mu"}
    assert any("not reproducible" in n for n in suite.meta["notes"])


def test_nonlocal_norm_option_scales_the_energy_factor():
    from zoo.graph import as_graph
    from zoo.models.transformer import GraphSelfAttention

    edge_index, n = awkward_graph()
    x = torch.randn(n, 8, dtype=torch.float64)
    g = as_graph(edge_index, x)
    outs = {}
    for norm in ("n", "nd", "none"):
        torch.manual_seed(0)
        layer = GraphSelfAttention(8, 2, nonlocal_energy=True, nonlocal_norm=norm).double()
        outs[norm] = layer(g, x)[0]
    torch.testing.assert_close(outs["none"], outs["n"] * n)
    torch.testing.assert_close(outs["nd"] * 8, outs["n"])
    with pytest.raises(ValueError, match="nd"):
        zoo.build("san_nonlocal", in_dim=3, out_dim=2, nonlocal_norm="1/n")
    with pytest.raises(ValueError, match="san_nonlocal"):
        zoo.build("san_post_ln", in_dim=3, out_dim=2, nonlocal_norm="none")


def test_loglog_slope_of_power_law():
    from zoo.diagnostics import loglog_slope

    assert loglog_slope([3.0 * k ** -0.5 for k in range(1, 65)]) == pytest.approx(-0.5)
    assert loglog_slope([2.0 ** -k for k in range(1, 65)]) < -5  # exponential decay: steep, bending


def test_nonlocal_accuracy_san_encoder_dropout():
    from zoo.bench.suite.load import load_suite

    cells = load_suite("nonlocal_accuracy", validate_models=False).cells
    assert all(c.config["model"]["kwargs"].get("input_dropout", 0) > 0 for c in cells)
    model = zoo.build("san_post_ln", in_dim=6, out_dim=3, input_dropout=0.5)
    assert model.input_dropout == 0.5 and model.dropout == 0.0
    edge_index, n = awkward_graph()
    x = torch.ones(n, 6)
    model.train()
    torch.manual_seed(0)
    a = model.encode(None, x)
    model.eval()
    assert not torch.allclose(a, model.encode(None, x))  # the encoder drops input features in training


def test_nonlocal_pruning_numbers_are_the_256_layer_models():
    entries = reported("nonlocal_pruning")["entries"]
    assert entries and all(e.get("num_layers") == 256 for e in entries)


def test_a_reduced_depth_pruning_run_has_no_paper_number():
    from zoo.bench.analyze.board import find_reported
    from zoo.bench.suite.cells import cell_value
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.reported import load_reported

    info = load_suite(SUITES / "nonlocal_pruning.toml", validate_models=False).resolved()
    rep = load_reported(REPORTED / "nonlocal_pruning.json")
    cfg = info["cells"][0]["config"]
    assert cell_value(cfg, "num_layers") == 256
    assert find_reported(rep, cfg, info["leaderboard"], 2) is not None
    reduced = json.loads(json.dumps(cfg))
    reduced["model"]["kwargs"]["num_layers"] = 64
    assert find_reported(rep, reduced, info["leaderboard"], 2) is None


def test_nonlocal_pruning_note_says_one_layer_is_skipped():
    notes = (REPO / "docs" / "reproduction" / "notes.toml").read_text()
    assert "pruned to its first 2 and 32 layers" not in notes


def test_nonlocal_table7_conflict_is_recorded_where_the_number_is_stored():
    text = paper_text("nonlocal-message-passing-oversmoothing")
    table7 = text[text.index("Table 7: Accuracy of nonlocal SAN"):][:400]
    assert "92.12" in table7 and "85.40" in table7
    cells = {e["metric"]: e for e in reported("nonlocal_accuracy")["entries"]
             if e["dataset"] == "cora" and e["model"] == "san_nonlocal" and e["num_layers"] == 256}
    assert "92.12" in cells["train"].get("note", "") and "85.40" in cells["val"].get("note", "")


def test_nonlocal_pruning_has_the_encoder_dropout_of_nonlocal_accuracy():
    assert suite("nonlocal_pruning")["defaults"]["input_dropout"] == suite("nonlocal_accuracy")["defaults"][
        "input_dropout"] == 0.5


@pytest.mark.parametrize("name", ["nonlocal_accuracy", "nonlocal_pruning"])
def test_nonlocal_suites_say_the_optimizer_is_our_choice(name):
    text = (SUITES / f"{name}.toml").read_text()
    assert re.search(r"B\.1 names\s*(#\s*)?no optimizer|B\.1 names none", text), \
        "the suite must record that Appendix B.1 names no optimizer (Adam is our choice)"


def test_pre_ln_keeps_accuracy_reads_the_splits_its_quote_names():
    assert finding("nonlocal_accuracy", "pre_ln_keeps_accuracy")["check"]["metric"] == "val"
    assert finding("nonlocal_accuracy", "pre_ln_keeps_train_accuracy")["check"]["metric"] == "train"
