"""Issue 23 (fidelity round 3): the stored paper numbers and suite protocols the audit found wrong.

Each test reads the shipped data (``benchmarks/suites/*.toml``, ``reported/*.json``) or the
papers' text (``../shared/papers``, skipped where absent) and fails on the data before the fix.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import papers_dir

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "benchmarks" / "suites"
REPORTED = SUITES / "reported"

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

#: two-sided 95 % Student t quantiles by degrees of freedom
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def reported(name: str) -> dict:
    return json.loads((REPORTED / f"{name}.json").read_text())


def suite(name: str) -> dict:
    return tomllib.loads((SUITES / f"{name}.toml").read_text())


def paper_text(name: str) -> str:
    return (papers_dir() / f"{name}.md").read_text()


# --------------------------------------------------------------------------- item 1


def test_nonlocal_pruning_numbers_are_the_256_layer_models():
    entries = reported("nonlocal_pruning")["entries"]
    assert entries and all(e.get("num_layers") == 256 for e in entries)


def test_a_reduced_depth_pruning_run_has_no_paper_number():
    from zoo.bench.analyze.board import find_reported
    from zoo.bench.spec.cells import cell_value
    from zoo.bench.spec.suite import load_reported, load_suite

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


# --------------------------------------------------------------------------- item 2


def _max_t_half_width(mean: float, n: int) -> float:
    """The largest 95 % t-CI half-width of n accuracies in [0, 100] with this mean."""
    variance = mean * (100 - mean) * n / (n - 1)  # the sample variance's maximum at this mean
    return T95[n - 1] * math.sqrt(variance / n)


@pytest.mark.parametrize("path", sorted(REPORTED.glob("*.json")), ids=lambda p: p.stem)
def test_every_stored_ci95_is_a_possible_five_run_t_interval(path):
    data = json.loads(path.read_text())
    if data.get("scale") != "percent":
        return
    for e in data["entries"]:
        if e.get("ci95") is not None:
            n = int(e.get("n", 5))
            assert e["ci95"] <= _max_t_half_width(float(e["value"]), n) + 1e-9, \
                f"{path.name}: {e} is not a 95 % CI over {n} runs; store it as 'spread' (unspecified)"


def test_balance_table7_stores_an_unspecified_spread():
    entries = reported("balance_table7")["entries"]
    assert all("ci95" not in e and "spread" in e for e in entries)
    cora = [e for e in entries if e["dataset"] == "cora" and e["init"] == "xavier" and e["num_layers"] == 2]
    assert [(e["value"], e["spread"]) for e in cora] == [(77.8, 0.9)]


# --------------------------------------------------------------------------- item 4


def test_balance_fig6_7_stores_the_numbers_of_section_3():
    text = paper_text("are-gats-out-of-balance")
    entries = reported("balance_fig6_7")["entries"]
    got = {(e["init"], e["hidden_dim"]): e["value"] for e in entries}
    assert got == {("xavier", 64): 24.7, ("xavier", 512): 68.7, ("balanced_orthogonal", 64): 79.7,
                   ("balanced_orthogonal", 512): 80.9}
    assert all(e["optimizer"] == "sgd" and e["num_layers"] == 10 and e["dataset"] == "cora" for e in entries)
    for value in got.values():
        assert f"{value}%" in text


def test_nonlocal_table7_conflict_is_recorded_where_the_number_is_stored():
    text = paper_text("nonlocal-message-passing-oversmoothing")
    table7 = text[text.index("Table 7: Accuracy of nonlocal SAN"):][:400]
    assert "92.12" in table7 and "85.40" in table7
    cells = {e["metric"]: e for e in reported("nonlocal_accuracy")["entries"]
             if e["dataset"] == "cora" and e["model"] == "san_nonlocal" and e["num_layers"] == 256}
    assert "92.12" in cells["train"].get("note", "") and "85.40" in cells["val"].get("note", "")


# --------------------------------------------------------------------------- item 5


def test_nonlocal_pruning_has_the_encoder_dropout_of_nonlocal_accuracy():
    assert suite("nonlocal_pruning")["defaults"]["input_dropout"] == suite("nonlocal_accuracy")["defaults"][
        "input_dropout"] == 0.5


@pytest.mark.parametrize("name", ["nonlocal_accuracy", "nonlocal_pruning"])
def test_nonlocal_suites_say_the_optimizer_is_our_choice(name):
    text = (SUITES / f"{name}.toml").read_text()
    assert re.search(r"B\.1 names\s*(#\s*)?no optimizer|B\.1 names none", text), \
        "the suite must record that Appendix B.1 names no optimizer (Adam is our choice)"


def test_lipschitz_table1_compares_the_validation_accuracy_of_section_10_2():
    raw = suite("lipschitz_table1")
    assert raw["leaderboard"]["metric"] == "val"
    text = (SUITES / "lipschitz_table1.toml").read_text()
    assert "validation classification accuracy" in text and "grid-searches" in text


def test_balance_table6_can_test_the_adam_hypothesis():
    raw = suite("balance_table6")
    assert "bal_o_adam" in raw["grid"]["variant"]
    assert raw["variants"]["bal_o_adam"] == {"norm": "none", "init": "bal_o", "optimizer": "adam"}


@pytest.mark.parametrize("name,phrase", [
    ("oxford_table3", "dropout annealing"), ("oxford_table3", "--set bias=true"),
    ("oxford_table4", "--set bias=true"), ("balance_table3_4", "0.0001"),
])
def test_protocol_choices_are_recorded_with_their_source(name, phrase):
    assert phrase in (SUITES / f"{name}.toml").read_text()


# --------------------------------------------------------------------------- item 6


def _finding(name: str, fid: str) -> dict:
    return next(f for f in reported(name)["findings"] if f["id"] == fid)


def test_pre_ln_keeps_accuracy_reads_the_splits_its_quote_names():
    assert _finding("nonlocal_accuracy", "pre_ln_keeps_accuracy")["check"]["metric"] == "val"
    assert _finding("nonlocal_accuracy", "pre_ln_keeps_train_accuracy")["check"]["metric"] == "train"


def test_gatdb_beats_gat_quotes_a_result_not_only_an_expectation():
    quote = _finding("oxford_fig1", "gatdb_beats_gat")["quote"]
    assert "Unsurprisingly, the dynamic attention of the flexible GATDB is able to perfectly fit" in quote


def test_lipschitz_pubmed_depth_claim_is_encoded():
    f = _finding("lipschitz_table1", "lip_deeper_is_better_pubmed_100")
    assert "increasing accuracy as the number of layers is higher" in f["quote"]
    assert f["check"]["kind"] == "increasing"
    assert "increasing accuracy" not in _finding("lipschitz_table1", "lip_trains_deep_gat_pubmed_100")["quote"]


def test_quick_xavier_bound_is_the_papers_figure_4_number():
    f = _finding("quick", "cora_l10_xavier_does_not_train")
    assert f["check"]["value"] == 39.3 and "39.3%" in f["quote"]
    assert _finding("quick", "twin_gatdb_fits")["check"]["value"] == 100  # "perfectly fit the data every time"
