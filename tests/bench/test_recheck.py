"""`zoo report --recheck N`: committed records re-run and compared (zoo/bench/recheck.py), and the
float-order fields every record carries (docs/reliability.md, the determinism contract)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import REPO
from zoo.bench import recheck as rc
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.run.provenance import float_order
from zoo.bench.store.records import read_records
from zoo.bench.suite.load import parse_suite

TWIN = {
    "suite": {"name": "twin_float_order"},
    "defaults": {"dataset": "twin", "model": "gat", "num_layers": 1, "epochs": 3, "optimizer": "adam", "lr": 0.01},
    "grid": {"seed": [0, 1]},
    "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"},
}


def test_records_carry_what_decides_float_order(tmp_path, monkeypatch):
    """Regression: a record did not say what decides its float summation order, so a re-run that
    differed could not be told from a broken one."""
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    run_suite(parse_suite(TWIN), tmp_path / "out", RunOptions(device="cpu", quiet=True, threads=1))
    recs = read_records(tmp_path / "out")
    assert len(recs) == 2
    order = recs[0]["float_order"]
    assert {"cpu", "isa", "torch_cpu_capability", "torch_threads", "torch", "blas"} <= set(order)
    assert order["torch_threads"] == 1 and order["torch"] == torch.__version__ and "BLAS_INFO" in order["blas"]
    assert order == {**float_order(torch.device("cpu")), "torch_threads": 1}


def _candidate(cost, rid="r", suite="s"):
    return rc.Candidate(suite, Path("."), {"id": rid, "wall_time_s": cost, "seed": 0})


def test_the_draw_is_random_within_the_budget_and_run_cheapest_first():
    pool = [_candidate(c, f"r{c}") for c in (1, 50, 3, 700, 8, 2, 30)]
    chosen = rc.draw(pool, 4, max_minutes=2, seed=0)  # a per-record budget of 30 s
    assert len(chosen) == 4 and all(c.cost_s <= 30 for c in chosen)
    assert [c.cost_s for c in chosen] == sorted(c.cost_s for c in chosen)
    assert [c.record["id"] for c in rc.draw(pool, 4, 2, seed=0)] == [c.record["id"] for c in chosen]
    assert len(rc.draw(pool, 20, None, seed=1)) == len(pool)


def test_the_contract_breaks_on_a_changed_id_or_a_same_machine_difference():
    ok = rc.Outcome(_candidate(1), ran=True, new_id="r", bitwise=False, rel_diff=0.02, same_float_order=False)
    assert not ok.breaks_contract  # another machine: only the distribution is promised
    assert rc.Outcome(_candidate(1), ran=True, new_id="other", bitwise=True, rel_diff=0.0).breaks_contract
    assert rc.Outcome(_candidate(1), ran=True, new_id="r", bitwise=False, rel_diff=0.02,
                      same_float_order=True, same_code=True).breaks_contract
    assert not rc.Outcome(_candidate(1), ran=True, new_id="r", bitwise=False, rel_diff=0.02,
                          same_float_order=True, same_code=False).breaks_contract  # other code: not promised
    noise = rc.Outcome(_candidate(1), ran=True, new_id="r", bitwise=False, rel_diff=1e-15, same_float_order=True)
    assert noise.within_tolerance and not noise.breaks_contract
    assert rc._relative({"1": 0.5, "2": 0.25}, {"1": 0.5, "2": 0.25}) == 0.0
    text = rc.lines([ok, rc.Outcome(_candidate(2, "q"), error="not run: --max-minutes spent")])
    assert "differs (rel 2.00e-02)" in text[1] and "not run: --max-minutes spent" in text[2]
    assert text[-1].startswith("rechecked 1 of 2: ids equal 1")


@pytest.mark.slow
def test_recheck_ten_cheap_committed_records(capsys, mirror, monkeypatch, tmp_path):
    """`zoo report --recheck 10 --max-minutes 10` on the committed records: every cell id is the
    shipped suite's, and nothing breaks the determinism contract."""
    from zoo.cli import main

    monkeypatch.setenv("ZOO_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    records = REPO / "docs" / "reproduction" / "records"
    code = main(["report", str(records), "--recheck", "10", "--max-minutes", "10"])
    out = capsys.readouterr().out
    print(out)
    assert code == 0, out
    lines = out.strip().splitlines()
    assert len(lines) == 12 and lines[-1].startswith("rechecked ")
    ran = [line.split(" | ") for line in lines[1:-1] if len(line.split(" | ")) == 11]
    assert ran and all(fields[5] == "yes" for fields in ran)  # ids equal
    assert lines[-1].endswith("contract broken: 0")
