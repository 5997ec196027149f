"""[search]: hyper-parameters tuned per cell — expansion, id stability, restriction, parse errors."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from zoo._toml import tomllib
from zoo.bench.suite.load import parse_suite, suites_dir
from zoo.bench.suite.schema import SuiteError
from tests.conftest import SHIPPED_SUITES_GROUP, shipped_suite

pytestmark = pytest.mark.xdist_group(SHIPPED_SUITES_GROUP)  # lipschitz_table1 resolved once

REPO = Path(__file__).resolve().parents[3]
BASE = {
    "suite": {"name": "t"},
    "defaults": {"dataset": "twin", "model": "gat", "epochs": 3, "hidden_dim": 8, "lr": 0.005},
    "grid": {"num_layers": [1, 2], "variant": ["plain", "lip"], "seed": [0, 1]},
    "variants": {"plain": {"norm": "none"}, "lip": {"norm": "lipschitz"}},
    "quick": {"defaults": {"epochs": 1}, "grid": {"seed": [0]}},
    "leaderboard": {"rows": ["variant"], "metric": "val"},
}
SEARCH = {"lr": [0.01, 0.005], "dropout": [0.0, 0.5]}


def parse(search=None, quick=False, settings=None, **changes):
    raw = copy.deepcopy(BASE)
    raw.update(copy.deepcopy(changes))
    if search is not None:
        raw["search"] = copy.deepcopy(search)
    return parse_suite(raw, quick=quick, settings=settings)


def test_every_search_point_is_its_own_cells_grouped_by_seed():
    plain, s = parse(), parse(SEARCH)
    assert len(s.cells) == 4 * len(plain.cells)  # 2 lr x 2 dropout points per grid point
    assert len(s.groups()) == 4 * len(plain.groups())  # seeds of one point still train as stacked replicas
    assert all(len(g) == 2 for g in s.groups().values())
    points = {(c.config["train"]["lr"], c.config["model"]["kwargs"].get("dropout", 0.0)) for c in s.cells}
    assert points == {(0.01, 0.0), (0.01, 0.5), (0.005, 0.0), (0.005, 0.5)}
    assert s.resolved()["search"] == {"axes": SEARCH, "order": ["lr", "dropout"], "when": {}, "metric": "val"}
    assert "search" not in plain.resolved()  # suites without [search] resolve exactly as before


def test_the_point_equal_to_the_suite_keeps_its_cell_ids():
    """lr 0.005 / dropout 0 is the suite's own configuration (dropout 0 = the model's default, not
    written in [defaults]): its cells have today's ids, so existing records keep counting."""
    plain, s = parse(), parse(SEARCH)
    ids = {c.id for c in s.cells}
    assert {c.id for c in plain.cells} <= ids
    same = [c for c in s.cells if c.config["train"]["lr"] == 0.005 and "dropout" not in c.config["model"]["kwargs"]]
    assert sorted(c.id for c in same) == sorted(c.id for c in plain.cells)
    # a value written as 0 (int) or 0.0 is the same point
    assert {c.id for c in parse({"lr": [0.01, 0.005], "dropout": [0, 0.5]}).cells} == ids


def test_when_restricts_the_search_and_quick_runs_the_suites_own_point():
    s = parse({**SEARCH, "when": {"variant": "lip"}})
    by_variant = {}
    for c in s.cells:
        by_variant.setdefault(c.config["run"]["variant"], []).append(c)
    assert len(by_variant["plain"]) == 4 and len(by_variant["lip"]) == 16
    assert {c.id for c in by_variant["plain"]} == {c.id for c in parse().cells if c.config["run"]["variant"] == "plain"}
    q = parse(SEARCH, quick=True)
    assert q.search is None and len(q.cells) == len(parse(quick=True).cells)


def test_search_values_are_set_after_the_overrides():
    s = parse(SEARCH, override=[{"when": {"variant": "lip"}, "lr": 0.1}])
    assert {c.config["train"]["lr"] for c in s.cells if c.config["run"]["variant"] == "lip"} == {0.01, 0.005}


def test_the_selection_metric_defaults_to_the_leaderboards():
    assert parse(SEARCH).search.metric == "val"
    assert parse({**SEARCH, "metric": "train"}).search.metric == "train"


@pytest.mark.parametrize("search,extra,match", [
    ([{"lr": [0.1, 0.01]}, "lip"], {}, r"\[search\]: must be a table of axes.*or \[\[search\]\] tables"),
    ([], {}, r"\[search\]: must be a table of axes"),
    ([{"lr": [0.1, 0.01]}, {"dropout": [0.0, 0.5], "when": {"variant": "lip"}}], {},
     r"cell .*\[\[search\]\] tables #1 and #2 both select this cell.*merge their axes"),
    ([{"lr": [0.1, 0.01], "when": {"variant": "plain"}}, {"dropout": [0.0, 0.5], "when": {"variant": "lip"},
                                                          "metric": "train"}], {},
     r"\[\[search\]\]: the tables select by different metrics \(train, val\)"),
    ([{"lr": [0.1, 0.01], "when": {"variant": "plain"}}, {"seed": [0, 7]}], {},
     r"\[\[search\]\] #2: 'seed' names the experiment"),
    ({"when": {"variant": "lip"}}, {}, r"\[search\]: has no axis; give at least one, e\.g\. lr = "),
    ({"lr": 0.01}, {}, r"axis 'lr' must be a list of at least two values.*\[defaults\]"),
    ({"lr": [0.01]}, {}, r"axis 'lr' must be a list of at least two values"),
    ({"lr": [0.01, 0.01]}, {}, r"axis 'lr' lists a value twice"),
    ({"num_layers": [1, 3]}, {}, r"'num_layers' is also a \[grid\] axis"),
    ({"seed": [0, 7]}, {}, r"'seed' names the experiment.*make it a \[grid\] axis"),
    ({"norm": ["none", "pairnorm"]}, {"leaderboard": {"rows": ["norm"], "metric": "val"}},
     r"'norm' is a \[leaderboard\] row, column or table key"),
    ({"lr": [0.1, 0.01], "metric": "loss"}, {}, r"metric must be one of val, train, test.*got 'loss'"),
    ({"lr": [0.1, 0.01], "when": {"variantt": "lip"}}, {}, r"\[search\]: 'when' tests key\(s\) \['variantt'\]"),
    ({"lr": [0.1, 0.01], "when": "lip"}, {}, r"'when' must be a table"),
    ({"lernrate": [0.1, 0.01]}, {}, r"unknown key\(s\) 'lernrate'"),
    ({"dropout": [0.0, 1.5]}, {}, r"dropout"),
    ({"lr": [0.1, 0.01]}, {"leaderboard": {"rows": ["variant"], "metric": "laplacian_energy"}},
     r"search\]: metric must be one of .*the \[leaderboard\] metric; set \[search\] metric"),
])
def test_bad_search_tables_are_one_clear_line(search, extra, match):
    with pytest.raises(SuiteError, match=match) as info:
        parse(search, **extra)
    assert "\n" not in str(info.value)


TWO = [{"lr": [0.01, 0.005], "when": {"variant": "plain"}}, {"dropout": [0.0, 0.5], "hidden_dim": [8, 16],
                                                             "when": {"variant": "lip"}}]


def test_search_tables_tune_their_own_cells_over_their_own_axes():
    s = parse(TWO)
    by_variant = {}
    for c in s.cells:
        by_variant.setdefault(c.config["run"]["variant"], []).append(c)
    assert len(by_variant["plain"]) == 2 * 4 and len(by_variant["lip"]) == 4 * 4  # 2 lr / 2 x 2 points per grid point
    assert {c.config["train"]["lr"] for c in by_variant["plain"]} == {0.01, 0.005}
    assert {c.config["model"]["kwargs"].get("dropout", 0.0) for c in by_variant["plain"]} == {0.0}
    assert {c.config["train"]["lr"] for c in by_variant["lip"]} == {0.005}
    assert {c.config["model"]["kwargs"].get("hidden_dim") for c in by_variant["lip"]} == {8, 16}
    assert {c.id for c in parse().cells} <= {c.id for c in s.cells}  # the suite's own points keep their ids
    resolved = s.resolved()["search"]
    assert resolved["order"] == ["lr", "dropout", "hidden_dim"] and resolved["metric"] == "val"
    assert resolved["axes"] == {"lr": [0.01, 0.005], "dropout": [0.0, 0.5], "hidden_dim": [8, 16]}
    assert [t["when"] for t in resolved["tables"]] == [{"variant": "plain"}, {"variant": "lip"}]
    assert parse([SEARCH]).resolved()["search"] == parse(SEARCH).resolved()["search"]  # one table: as [search]
    with pytest.raises(SuiteError, match=r"--set hidden_dim: 'hidden_dim' is a \[search\] axis"):
        parse(TWO, settings={"hidden_dim": 32})


def test_set_refuses_a_search_axis():
    with pytest.raises(SuiteError, match=r"--set lr: 'lr' is a \[search\] axis.*--where lr="):
        parse(SEARCH, settings={"lr": 0.02})
    reduced = parse(SEARCH, settings={"epochs": 2})  # other keys still reduce every cell
    assert {c.config["train"]["epochs"] for c in reduced.cells} == {2} and len(reduced.cells) == 32


def _shipped_with_search():
    out = []
    for path in sorted(suites_dir().glob("*.toml")):
        if "search" in tomllib.loads(path.read_text()):
            out.append(path)
    return out


@pytest.mark.parametrize("path", _shipped_with_search(), ids=lambda p: p.stem)
def test_shipped_searches_keep_every_committed_record(path, tmp_path):
    """The suites' own point keeps its ids: the committed records (made before the search) are cells of
    the searched suite, and the suite without its [search] is a subset of it."""
    raw = tomllib.loads(path.read_text())
    searched = shipped_suite(path.stem)
    ids = {c.id for c in searched.cells}
    bare = dict(raw)
    bare.pop("search")
    plain = parse_suite(bare, source=str(path), validate_models=False)
    assert {c.id for c in plain.cells} <= ids and len(ids) > len(plain.cells)
    records = REPO / "docs" / "reproduction" / "records" / searched.name / "results.jsonl"
    if records.is_file():
        recorded = {json.loads(line)["id"] for line in records.read_text().splitlines() if line.strip()}
        assert recorded and recorded <= ids
