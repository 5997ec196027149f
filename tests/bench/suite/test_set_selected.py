"""``--set`` is checked against the cells ``--where`` selects, not the whole suite."""
from __future__ import annotations

import pytest

from zoo.bench.plan.shards import select
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import SuiteError


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


def test_the_cells_of_a_set_run_do_not_depend_on_the_where_slice():
    """Before, --set applied to the --where-selected cells only, so a second slice of the same --set run
    (more seeds) resolved other ids for the first slice's cells and its folder refused to resume."""
    raw = _raw()
    raw["grid"].update(dataset=["twin", "trees"], seed=[0, 1])
    first = parse_suite(raw, settings={"epochs": 1}, where={"seed": [0]})
    second = parse_suite(raw, settings={"epochs": 1}, where={"seed": [1]})
    assert [c.id for c in first.cells] == [c.id for c in second.cells]
    assert all(c.config["train"]["epochs"] == 1 for c in second.cells)


def test_an_unselected_cell_keeps_its_config_where_the_setting_does_not_apply():
    suite = parse_suite(_raw(), settings={"data.k": 3}, where={"dataset": ["twin"]})
    by_dataset = {c.config["task"]["dataset"]: c.config for c in suite.cells}
    assert by_dataset["twin"]["task"]["options"] == {"k": 3}
    assert "k" not in by_dataset["cornell"]["task"]["options"]


def test_a_second_where_slice_of_a_set_run_resumes_into_its_folder(tmp_path):
    import json

    from zoo.bench.store import records

    raw = _raw()
    raw["grid"].update(dataset=["twin", "trees"], seed=[0, 1])
    first = parse_suite(raw, settings={"epochs": 1}, where={"seed": [0]})
    (tmp_path / records.RESOLVED_FILE).write_text(json.dumps(first.resolved()))
    done = select(first, {"seed": [0]})[0]
    (tmp_path / records.RESULTS_FILE).write_text(json.dumps({"id": done.id, "status": "ok"}) + "\n")
    second = parse_suite(raw, settings={"epochs": 1}, where={"seed": [1]})
    assert records.check_same_suite(tmp_path, second.resolved()) is None
    other = parse_suite(raw, settings={"epochs": 3}, where={"seed": [1]})  # another protocol: still refused
    with pytest.raises(records.SuiteMismatchError):
        records.check_same_suite(tmp_path, other.resolved())


def test_a_setting_an_unselected_cells_model_rejects_leaves_that_cell_as_it_is():
    """GCN takes a ``heads`` key but builds only with one head: ``--set heads=8 --where model=gat`` on a
    GCN + GAT suite failed to load ('gcn has no attention heads'), so a GAT-only --set probe could not run."""
    raw = _raw()
    raw["grid"].update(dataset=["twin"], model=["gcn", "gat"])
    where = {"model": ["gat"]}
    suite = parse_suite(raw, settings={"heads": 8}, where=where)
    heads = {c.config["model"]["name"]: c.config["model"]["kwargs"].get("heads") for c in suite.cells}
    assert heads == {"gat": 8, "gcn": None}
    with pytest.raises(SuiteError, match="gcn has no attention heads"):  # selected, it is still refused
        parse_suite(raw, settings={"heads": 8}, where={"model": ["gcn"]})
