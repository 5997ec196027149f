"""Runner, records, resumption after a kill, leaderboard numbers, and every suite's --quick form."""
from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

from zoo.bench.publish import write_leaderboard
from zoo.bench.store.records import CorruptRecordsError, append_record, read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import list_suites, load_suite, parse_suite

TWIN = {
    "suite": {"name": "twin_test", "title": "twin test"},
    "defaults": {"dataset": "twin", "num_layers": 1, "epochs": 15, "optimizer": "adam", "lr": 0.01},
    "grid": {"model": ["gat", "gatdb"], "k": [3, 4], "seed": [0, 1, 2]},
    "leaderboard": {"rows": ["model"], "columns": "k", "metric": "test"},
}


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("ZOO_DATA", str(root))
    return root


def test_records_and_leaderboard_recomputed_independently(tmp_path, data_root):
    out = tmp_path / "run"
    summary = run_suite(parse_suite(TWIN), out, RunOptions(device="cpu", quiet=True))
    assert summary.ran == 12 and not summary.skipped
    recs = read_records(out)
    assert len(recs) == 12 and len({r["id"] for r in recs}) == 12
    r0 = recs[0]
    for key in ("config", "seed", "split", "metrics", "epochs_to_best", "diverged", "wall_time_s", "time_per_epoch_s",
                "peak_memory_bytes", "num_parameters", "device", "versions", "commit", "preprocessing"):
        assert key in r0, key
    assert set(r0["metrics"]) == {"train", "val", "test"}
    paths = write_leaderboard([out], out / "leaderboard")
    assert all(p.exists() for p in paths.values())
    # Independent recomputation straight from the JSONL: mean, sample std, t-based 95% CI.
    T975 = {1: 12.706204736, 2: 4.302652730}
    board = json.loads(paths["json"].read_text())[0]["entries"]
    assert len(board) == 4
    for row in board:
        values = [100 * json.loads(line)["metrics"]["test"] for line in (out / "results.jsonl").read_text().splitlines()
                  if json.loads(line)["config"]["model"]["name"] == row["model"]
                  and json.loads(line)["config"]["task"]["options"]["k"] == row["column_value"]]
        assert row["n"] == len(values) == 3
        assert row["mean"] == pytest.approx(sum(values) / 3)
        assert row["std"] == pytest.approx(statistics.stdev(values))
        assert row["ci95"] == pytest.approx(T975[2] * statistics.stdev(values) / math.sqrt(3))
    md = paths["md"].read_text()
    assert "| gatdb |" in md and "k=3" in md and "± " in md
    html = paths["html"].read_text()
    assert "<svg" in html and "http" not in html.split("<svg")[0].replace("http-equiv", "")
    # A second run is a no-op: every id is logged.
    again = run_suite(parse_suite(TWIN), out, RunOptions(device="cpu", quiet=True))
    assert again.ran == 0 and again.already_done == 12 and len(read_records(out)) == 12


def test_partial_line_is_an_error_not_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, {"id": "a", "x": 1})
    with open(path, "ab") as fh:
        fh.write(b'{"id": "b", "x"')
    with pytest.raises(CorruptRecordsError, match="partial line"):
        read_records(path)
    path.write_text('{"id": "a"}\nnot json\n')
    with pytest.raises(CorruptRecordsError, match=":2: not a JSON object"):
        read_records(path)


def test_diverged_runs_are_recorded_and_the_suite_goes_on(tmp_path, data_root):
    raw = json.loads(json.dumps(TWIN))
    raw["defaults"].update({"optimizer": "sgd", "model": "gcn", "activation": "identity", "hidden_dim": 8})
    raw["grid"] = {"num_layers": [3], "lr": [1e9, 0.01], "seed": [0]}
    raw["leaderboard"] = {"rows": ["lr"], "columns": "num_layers", "metric": "test"}
    out = tmp_path / "div"
    summary = run_suite(parse_suite(raw), out, RunOptions(device="cpu", quiet=True))
    recs = {r["config"]["train"]["lr"]: r for r in read_records(out)}
    assert summary.ran == 2 and summary.diverged == 1
    assert recs[1e9]["diverged"] and recs[1e9]["diverged_epoch"] >= 1 and recs[1e9]["stop_reason"] == "diverged"
    assert not recs[0.01]["diverged"]
    assert "⚠1 diverged" in (write_leaderboard([out], out / "lb")["md"]).read_text()


RESUME_SCRIPT = textwrap.dedent("""
    import json, sys
    from zoo.bench.run.driver import run_suite
    from zoo.bench.run.options import RunOptions
    from zoo.bench.suite.load import parse_suite
    raw = json.loads(sys.argv[1])
    run_suite(parse_suite(raw), sys.argv[2], RunOptions(device="cpu", quiet=True, stacked=False))
""")


@pytest.mark.slow  # kills a driver mid-run (~9 s); the checkpoint kill -9 test stays in make test
def test_resume_after_kill_loses_nothing_and_duplicates_nothing(tmp_path, data_root):
    raw = json.loads(json.dumps(TWIN))
    raw["defaults"]["epochs"] = 60
    raw["grid"] = {"model": ["gat"], "k": [3, 4, 5, 6], "seed": [0, 1, 2, 3]}
    out = tmp_path / "resume"
    env = {**os.environ, "ZOO_DATA": str(data_root)}
    proc = subprocess.Popen([sys.executable, "-c", RESUME_SCRIPT, json.dumps(raw), str(out)], env=env)
    results = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:  # kill once a few runs are logged, mid-suite
        if results.exists() and len(results.read_bytes().splitlines()) >= 3:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_records(out)  # must parse: no partial line
    assert 3 <= len(before) < 16, "the kill should land mid-suite"
    summary = run_suite(parse_suite(raw), out, RunOptions(device="cpu", quiet=True))
    after = read_records(out)
    assert summary.already_done == len(before) and summary.ran == 16 - len(before)
    assert len(after) == 16 and len({r["id"] for r in after}) == 16
    assert [r["id"] for r in after[:len(before)]] == [r["id"] for r in before]


def test_lock_prevents_two_runners(tmp_path, data_root):
    import fcntl

    out = tmp_path / "locked"
    out.mkdir()
    with open(out / "suite.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        with pytest.raises(RuntimeError, match="another runner"):
            run_suite(parse_suite(TWIN), out, RunOptions(device="cpu", quiet=True))


def _missing_models(name: str) -> list:
    import zoo

    from zoo._toml import tomllib
    from zoo.bench.suite.load import find_suite

    raw = tomllib.loads(find_suite(name).read_text())
    names = set()
    for table in [raw.get("defaults", {}), raw.get("grid", {}), *raw.get("variants", {}).values()]:
        v = table.get("model")
        names.update(v if isinstance(v, list) else [v] if v else [])
    return sorted(n for n in names if n.split(".")[0] not in zoo.list_models())


#: quick forms whose end-to-end run is marked slow, and what covers them on every run
SLOWER_QUICK_FORMS = ("nonlocal_accuracy", "oxford_table3", "lipschitz_table3", "balance_table7", "ogb_molhiv", "field_2024",
                      # the twin task's 32 training graphs: the same dataset and families run end to end in
                      # oxford_fig1_code's quick form; its cells parse and stay quick (tests/bench/suite/test_suite.py)
                      "oxford_fig1")


#: quick forms run here with fewer epochs (``--set epochs=N``: the same cells otherwise), where the
#: epochs are most of the time and no schedule depends on them; that every quick cell trains at
#: most its [quick] epochs is tests/bench/suite/test_suite.py's
FEWER_EPOCHS = {"gate_synthetic": 5,  # 1000-node graphs, [quick] 200 epochs
                "rescale_heterophilous": 10,  # minesweeper (10k nodes); still two rescaling sweeps (epochs 0 and 10)
                "oxford_fig1_code": 3,  # an epoch is k! steps
                "gate_real": 5, "quick": 4}


@pytest.mark.parametrize("name", [n for n in list_suites() if n not in SLOWER_QUICK_FORMS])
def test_quick_forms_run_end_to_end(name, tmp_path, data_root, mirror):
    missing = _missing_models(name)
    if missing:
        pytest.skip(f"suite {name} needs model(s) {missing} that are not registered yet")
    out = tmp_path / name
    settings = {"epochs": FEWER_EPOCHS[name]} if name in FEWER_EPOCHS else None
    summary = run_suite(load_suite(name, quick=True, settings=settings), out, RunOptions(device="cpu", quiet=True))
    assert summary.ran + len(summary.skipped) == summary.total
    assert summary.ran > 0, f"every cell skipped: {set(summary.skipped.values())}"
    paths = write_leaderboard([out], out / "leaderboard")
    md = paths["md"].read_text()
    assert "±" in md or "(n=1)" in md or " … " in md  # " … ": geometric [min … max] of energies


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOWER_QUICK_FORMS)  # ogb_molhiv: OGB processes the CSVs (~30-50 s) in a fresh root
def test_slower_quick_forms_run_end_to_end(name, tmp_path, data_root, mirror):
    test_quick_forms_run_end_to_end(name, tmp_path, data_root, mirror)
