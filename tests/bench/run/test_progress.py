"""Progress as a user sees it: work in flight is shown, and nothing is drawn when
nothing runs."""
from __future__ import annotations

from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.run.executors import LocalExecutor
from zoo.bench.suite.load import parse_suite
from tests.conftest import tiny_twin_suite


def test_progress_shows_work_in_flight_and_nothing_when_all_is_done(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    suite = parse_suite(tiny_twin_suite("progress"))
    out = tmp_path / "o"
    executor = LocalExecutor(quiet=False)
    run_suite(suite, out, RunOptions(device="cpu", quiet=False, executor=executor, stacked=False))
    err = capsys.readouterr().err
    assert "run(s) in flight" in err, err[-500:]
    run_suite(suite, out, RunOptions(device="cpu", quiet=False, executor=LocalExecutor(quiet=False)))  # all done
    assert capsys.readouterr().err == ""  # no empty "0run" bar line
