"""``data_seed = "seed"``: each run draws its random split from its own seed.

With the default ``data_seed = 0`` the nonlocal suite's five seeds shared one Cora split, so their mean carried
that split's luck; the paper's single run is one draw of split and initialisation.
"""
from __future__ import annotations

import copy

import pytest

from zoo.bench.suite.load import load_suite, parse_suite
from zoo.bench.suite.schema import SuiteError

BASE = {
    "suite": {"name": "t"},
    "defaults": {"dataset": "cora", "model": "gcn", "split": "ratio", "epochs": 3, "hidden_dim": 8},
    "grid": {"seed": [0, 1, 2]},
}


def parse(**defaults):
    raw = copy.deepcopy(BASE)
    raw["defaults"].update(defaults)
    return parse_suite(raw, validate_models=False)


def test_data_seed_follows_the_run_seed():
    cells = parse(data_seed="seed").cells
    assert [c.config["task"]["data_seed"] for c in cells] == [0, 1, 2]
    assert len({c.group for c in cells}) == 3  # different splits: never stacked as replicas of one task


def test_resolved_value_is_the_integer():
    """The stored config holds the integer, so the seed-0 cell is the data_seed = 0 cell (same id)."""
    following = parse(data_seed="seed").cells
    fixed = parse(data_seed=0).cells
    assert following[0].id == fixed[0].id
    assert following[1].id != fixed[1].id
    assert [c.config["task"]["data_seed"] for c in fixed] == [0, 0, 0]


def test_bad_data_seed_is_one_clear_error():
    with pytest.raises(SuiteError, match=r"data_seed must be an integer or 'seed'.*got 'seeds'"):
        parse(data_seed="seeds")
    with pytest.raises(SuiteError, match=r"'data_seed' must be int or str"):
        parse(data_seed=1.5)


def test_nonlocal_accuracy_suite_uses_a_split_per_seed_with_the_papers_sizes():
    suite = load_suite("nonlocal_accuracy", validate_models=False)
    for cell in suite.cells:
        task = cell.config["task"]
        assert task["data_seed"] == cell.seed
        assert task["options"].get("ratio_rounding") == "floor"


def _cell(**keys):
    raw = {"suite": {"name": "t"}, "defaults": {"model": "gcn", "epochs": 3, "hidden_dim": 8, **keys}}
    return parse_suite(raw, validate_models=False).cells[0]


def test_a_data_seed_that_draws_nothing_is_not_another_cell():
    """On a fixed split (Cora's public one, a stored split) without a seeded transform the same data gets
    one id, whatever data_seed says."""
    for keys in ({"dataset": "cora"}, {"dataset": "cora", "split": "public"}, {"dataset": "cornell", "split": 3}):
        assert _cell(**keys, data_seed=5).id == _cell(**keys).id, keys
        assert _cell(**keys, data_seed=5).config["task"]["data_seed"] == 0
    cells = parse_suite({**BASE, "defaults": {**BASE["defaults"], "split": "public", "data_seed": "seed"}},
                        validate_models=False).cells
    assert len({c.group for c in cells}) == 1  # the same data: replicas of one group
    for drawn in ({"dataset": "cora", "split": "ratio"}, {"dataset": "coauthor_cs"}, {"dataset": "twin"},
                  {"dataset": "cora", "transforms": [["missing_features", {"p": 0.5}]]}):
        assert _cell(**drawn, data_seed=5).id != _cell(**drawn).id, drawn


def test_only_a_dataset_with_a_public_split_offers_it():
    with pytest.raises(SuiteError, match="unknown split 'public'.*Valid splits: geom_gcn, per_class"):
        _cell(dataset="cornell", split="public")  # WebKB has ten stored splits and no public one
    with pytest.raises(SuiteError, match="named splits: geom_gcn, per_class") as e:
        _cell(dataset="cornell", split=12)
    assert "public" not in str(e.value)
    assert _cell(dataset="cora", split="public").id == _cell(dataset="cora").id  # Planetoid's own split
