"""A replica that fails is recorded failed on its own; its group's other replicas finish."""
from __future__ import annotations

import pytest

from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import parse_suite
from zoo.bench.store import records
from zoo.inits import INITS, register_init
from zoo.inits.xavier import xavier


@pytest.fixture
def flaky_init():
    @register_init("test_flaky_init")
    def flaky(model, fail: bool = False) -> None:
        if fail:
            raise RuntimeError("this replica's init fails")
        xavier(model)

    yield
    INITS._items.pop("test_flaky_init", None)


def test_one_failing_replica_does_not_take_its_group_with_it(tmp_path, flaky_init):
    raw = {"suite": {"name": "flaky"},
           "defaults": {"model": "gat", "dataset": "cornell", "num_layers": 2, "hidden_dim": 8, "epochs": 2,
                        "init": "test_flaky_init"},
           "grid": {"seed": [0, 1], "init_kwargs": [{}, {"fail": True}]}}
    suite = parse_suite(raw, source="test")
    assert len(suite.groups()) == 1 and len(suite.cells) == 4  # one stacked group of four replicas
    summary = run_suite(suite, tmp_path, RunOptions(quiet=True))
    got = records.read_records(tmp_path / records.RESULTS_FILE)
    status = {(r["seed"], bool(r["config"]["model"]["init_kwargs"])): r["status"] for r in got}
    assert status == {(0, False): records.OK, (1, False): records.OK,
                      (0, True): records.FAILED, (1, True): records.FAILED}
    assert all("this replica's init fails" in r["error"] for r in got if r["status"] == records.FAILED)
    assert len(summary.failed) == 2
