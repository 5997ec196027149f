"""``--set`` is checked against the cells ``--where`` selects, not the whole suite (issue 26, item 7)."""
from __future__ import annotations

import pytest

from zoo.bench.spec.selection import select
from zoo.bench.spec.suite import SuiteError, parse_suite


def _raw():
    return {"suite": {"name": "two"}, "defaults": {"model": "gat", "epochs": 2, "num_layers": 1},
            "grid": {"dataset": ["twin", "cornell"], "seed": [0]},
            "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"}}


def test_set_of_an_option_only_the_selected_dataset_has():
    with pytest.raises(SuiteError, match="dataset 'cornell' has no option 'k'"):
        parse_suite(_raw(), settings={"data.k": 3})  # the whole suite: cornell has no k
    where = {"dataset": ["twin"]}
    suite = parse_suite(_raw(), settings={"data.k": 3}, where=where)
    (cell,) = select(suite, where)
    assert cell.config["task"]["options"] == {"k": 3}
    assert suite.replaced == {"data.k": [4]}  # what --set replaced, in the selected cells


def test_ids_of_selected_cells_do_not_depend_on_the_selection():
    """A --where run with --set gives the selected cells the ids a full --set run would."""
    raw = _raw()
    raw["grid"]["dataset"] = ["twin", "trees"]
    full = {c.config["task"]["dataset"]: c.id for c in parse_suite(raw, settings={"epochs": 1}).cells}
    part = parse_suite(raw, settings={"epochs": 1}, where={"dataset": ["twin"]})
    assert select(part, {"dataset": ["twin"]})[0].id == full["twin"]
