"""``zoo report --todo``: the fill commands of every suite, cheapest first, filtered and cut."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from zoo.bench.report.missing_cost import NEEDS_GPU, RUNS_HERE, FillCommand
from zoo.bench.report.status import Report
from zoo.bench.report.todo import todo
from zoo.bench.render.missing import todo_lines
from zoo.cli import main


def _cmd(suite: str, dataset: str, seconds: float) -> FillCommand:
    return FillCommand(suite, (("dataset", (dataset,)),), runs=5, seconds=seconds, cells=1)


def _report() -> Report:
    ran = SimpleNamespace(fill=[_cmd("t2", "texas", 600.0), _cmd("t2", "cora", 30 * 3600.0)])
    unrun = {"suite": "t7", "fill": [_cmd("t7", "citeseer", 60.0), _cmd("t7", "pubmed", 3 * 3600.0)]}
    return Report([ran], [unrun], [])


def test_todo_orders_all_suites_cheapest_first() -> None:
    got = [(c.suite, c.seconds) for c in todo(_report())]
    assert got == [("t7", 60.0), ("t2", 600.0), ("t7", 3 * 3600.0), ("t2", 30 * 3600.0)]


def test_todo_filters_by_class_and_cuts_at_max_hours() -> None:
    assert [c.cls for c in todo(_report(), "gpu")] == [NEEDS_GPU]
    assert {c.cls for c in todo(_report(), "runs-here")} == {RUNS_HERE}
    assert [c.seconds for c in todo(_report(), max_hours=1.0)] == [60.0, 600.0]
    assert todo(_report(), max_hours=0.001) == []
    with pytest.raises(ValueError, match="unknown class 'cpu'"):
        todo(_report(), "cpu")


def test_todo_lines_run_as_they_stand_with_a_running_total() -> None:
    lines = todo_lines(todo(_report(), "runs-here"), out_root="docs/reproduction/records")
    assert lines[0].startswith("zoo bench t7 --where dataset=citeseer --out docs/reproduction/records/t7   # ")
    assert "total 11 min" in lines[1] and lines[1].endswith("runs here")
    assert "--out" not in todo_lines(todo(_report()))[0]


def test_todo_options_need_todo(capsys: pytest.CaptureFixture) -> None:
    assert main(["report", "--class", "gpu"]) == 2
    assert "go with --todo" in capsys.readouterr().err


def test_todo_lines_give_a_gpu_commands_gpu_time() -> None:
    gpu = FillCommand("t2", (("dataset", ("cora",)),), runs=5, seconds=30 * 3600.0, cells=1, gpu_seconds=1200.0)
    assert todo_lines([gpu])[0].endswith("needs a GPU, ≈ 20 min on one GPU")


def test_todo_lists_no_paper_cell_without_suite_cells() -> None:
    """A paper cell the suite has no cell for (*no cell of the suite*) has no command: ``--class
    runs-here`` lists only the commands of the suites' fill lists, none for it."""
    from zoo.bench.report.missing_cost import NO_CELL, MissingCell, fill_commands

    nowhere = MissingCell({"dataset": "cora", "hidden_dim": 512, "table": "T", "value": 1.0}, [], {})
    assert nowhere.cls == NO_CELL != RUNS_HERE
    fill = fill_commands("t2", [nowhere], lambda config, key: None, [], {})
    assert fill == []
    report = Report([SimpleNamespace(fill=fill, missing=[nowhere])], [], [])
    assert todo(report, "runs-here") == [] and todo(report) == []
