"""--where slices, --shard I/N + zoo merge, failed records (retried, ignored by the leaderboard)."""
from __future__ import annotations

import json

import pytest

from zoo.bench.analyze.board import load_board
from zoo.bench.publish import write_leaderboard
from zoo.bench.store.merge import MergeError, merge
from zoo.bench.store.records import append_record, completed_ids, read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.plan.shards import parse_shard, select, shard_groups
from zoo.bench.suite.selection import SelectionError, parse_where
from zoo.bench.suite.load import load_suite, parse_suite
from zoo.cli import main

# 6 groups (model x k) of 2 replicas (init): tiny and float64, so every executor / shard agrees bitwise.
TINY = {
    "suite": {"name": "tiny_exec", "title": "executor test"},
    "defaults": {"dataset": "twin", "num_layers": 1, "hidden_dim": 8, "epochs": 6, "optimizer": "adam", "lr": 0.01,
                 "dtype": "float64"},
    "grid": {"model": ["gat", "gatv2"], "k": [3, 4, 5], "init": ["xavier", "bal_o"]},
    "leaderboard": {"rows": ["model", "init"], "columns": "k", "metric": "test"},
}


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("ZOO_DATA", str(root))
    return root


def by_id(folder) -> dict:
    recs = read_records(folder)
    assert len({r["id"] for r in recs}) == len(recs), "duplicate records"
    return {r["id"]: r for r in recs}


def same_numbers(a: dict, b: dict) -> None:
    assert set(a) == set(b)
    for i in a:
        for key in ("metrics", "train_loss", "val_loss", "epochs_to_best", "epochs_run", "stop_reason", "config"):
            assert a[i][key] == b[i][key], (i, key)


# --------------------------------------------------------------------------- --where


def test_parse_where():
    assert parse_where(["dataset=cora", "num_layers=2,5", "init=bal_o"]) == {
        "dataset": ["cora"], "num_layers": [2, 5], "init": ["bal_o"]}
    for bad in (["dataset"], ["=cora"], ["dataset="]):
        with pytest.raises(SelectionError, match="KEY=V1"):
            parse_where(bad)
    with pytest.raises(SelectionError, match="given twice"):
        parse_where(["seed=0", "seed=1"])


def test_where_selects_matching_cells_of_a_real_suite():
    suite = load_suite("balance_table2", validate_models=False)
    cells = select(suite, {"dataset": ["cornell_npz"], "num_layers": [2, 5]})
    assert cells and all(c.config["task"]["dataset"] == "cornell_npz" for c in cells)
    assert {c.config["model"]["kwargs"]["num_layers"] for c in cells} == {2, 5}
    # Case and separators are normalised like names everywhere else; ids are the full suite's.
    assert [c.id for c in select(suite, {"dataset": ["Cornell-NPZ"], "num_layers": [2, 5]})] == [c.id for c in cells]
    full = {c.id for c in suite.cells}
    assert {c.id for c in cells} <= full and len(cells) < len(full)


@pytest.mark.parametrize("where,needle", [
    ({"layers": [2]}, "unknown key 'layers' (did you mean 'num_layers'"),
    ({"num_layers": [3]}, "no cell of suite 'quick' has num_layers=3. Its values of num_layers: 1, 10, 2"),
    ({"dataset": ["citeseer"]}, "Its values of dataset: cora, twin"),
    ({"dataset": ["twin"], "num_layers": [10]}, "no cell matches all clauses together"),
])
def test_where_errors_name_the_valid_choices(where, needle):
    with pytest.raises(SelectionError) as e:
        select(load_suite("quick", quick=True), where)
    assert needle in str(e.value)


def test_where_errors_exit_2_on_the_command_line(capsys, tmp_path):
    assert main(["bench", "quick", "--quick", "--where", "num_layers=3", "--out", str(tmp_path / "o")]) == 2
    assert "Its values of num_layers: 1, 10, 2" in capsys.readouterr().err
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_slice_keeps_full_suite_ids_so_a_full_run_skips_it(tmp_path, data_root):
    suite = parse_suite(TINY)
    out = tmp_path / "run"
    sliced = run_suite(suite, out, RunOptions(device="cpu", quiet=True, where={"k": [4], "model": ["gatv2"]}))
    assert sliced.total == sliced.ran == 2
    info = json.loads((out / "suite.resolved.json").read_text())
    assert len(info["cells"]) == 12 and info["selection"]["where"] == {"k": [4], "model": ["gatv2"]}
    full = run_suite(suite, out, RunOptions(device="cpu", quiet=True))
    assert full.already_done == 2 and full.ran == 10 and len(by_id(out)) == 12


# --------------------------------------------------------------------------- --shard + merge


def test_parse_shard():
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "a/b", "3", "1/0"):
        with pytest.raises(SelectionError, match="--shard"):
            parse_shard(bad)


def test_shards_partition_the_groups_deterministically_and_balance_cost():
    from zoo.bench.plan.shards import group_cost

    suite = load_suite("balance_table2", validate_models=False)
    groups = suite.groups()
    parts = [shard_groups(groups, i, 4) for i in range(1, 5)]
    assert sorted(g for p in parts for g in p) == sorted(groups)  # disjoint, nothing dropped
    assert parts == [shard_groups(groups, i, 4) for i in range(1, 5)]  # deterministic
    loads = [sum(group_cost(groups[g]) for g in p) for p in parts]
    biggest = max(group_cost(g) for g in groups.values())
    assert max(loads) - min(loads) <= biggest  # greedy LPT: within one group of each other
    # Squirrel (217k edges) L=40 costs far more than Cornell L=2 (no data loaded for this).
    cost = {(g[0].config["task"]["dataset"], g[0].config["model"]["kwargs"]["num_layers"]): group_cost(g)
            for g in groups.values()}
    assert cost[("squirrel_npz", 40)] > 100 * cost[("cornell_npz", 2)]


def test_shards_then_merge_equal_the_unsharded_run(tmp_path, data_root, capsys):
    suite = parse_suite(TINY)
    whole = tmp_path / "whole"
    run_suite(suite, whole, RunOptions(device="cpu", quiet=True))
    shards = []
    for i in (1, 2, 3):
        shards.append(tmp_path / f"shard{i}")
        s = run_suite(suite, shards[-1], RunOptions(device="cpu", quiet=True, shard=(i, 3)))
        assert s.ran == s.total == 4  # 6 equal groups of 2 -> 2 groups per shard
    ids = [set(by_id(s)) for s in shards]
    assert not (ids[0] & ids[1]) and not (ids[1] & ids[2]) and not (ids[0] & ids[2])
    merged = tmp_path / "merged"
    assert main(["merge", *map(str, shards), "--out", str(merged)]) == 0
    assert "12 finished run(s) of 12" in capsys.readouterr().out
    same_numbers(by_id(merged), by_id(whole))
    assert "selection" not in json.loads((merged / "suite.resolved.json").read_text())
    a, b = load_board(merged), load_board(whole)
    assert [(e.row, e.column, e.summary.mean) for e in a.entries] == [(e.row, e.column, e.summary.mean)
                                                                      for e in b.entries]
    assert main(["leaderboard", str(merged), "--out", str(tmp_path / "lb")]) == 0
    # A re-run of the merged folder has nothing left to do.
    assert run_suite(suite, merged, RunOptions(device="cpu", quiet=True)).ran == 0


def test_merge_refuses_overlaps_other_suites_and_partial_outputs(tmp_path, data_root):
    suite = parse_suite(TINY)
    one, one_again = tmp_path / "s1", tmp_path / "s1b"
    run_suite(suite, one, RunOptions(device="cpu", quiet=True, shard=(1, 3)))
    run_suite(suite, one_again, RunOptions(device="cpu", quiet=True, shard=(1, 3)))
    with pytest.raises(MergeError, match="both shard 1/3"):
        merge([one, one_again], tmp_path / "m1")
    with pytest.raises(MergeError, match="given twice"):
        merge([one, one], tmp_path / "m1")
    other = json.loads(json.dumps(TINY))
    other["defaults"]["epochs"] = 7
    two = tmp_path / "other"
    run_suite(parse_suite(other), two, RunOptions(device="cpu", quiet=True, shard=(2, 3)))
    with pytest.raises(MergeError, match="different suites"):
        merge([one, two], tmp_path / "m2")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("")
    with pytest.raises(MergeError, match="not an empty folder"):
        merge([one], tmp_path / "busy")
    for name in ("m1", "m2"):  # nothing half-written is left behind
        assert not (tmp_path / name).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --------------------------------------------------------------------------- failed records


def test_failed_records_are_retried_and_ignored_by_the_leaderboard(tmp_path, data_root):
    raw = json.loads(json.dumps(TINY))
    raw["grid"]["k"] = [1, 3]  # twin k=1 raises when the task is built: that group fails, the rest runs
    suite = parse_suite(raw)
    out = tmp_path / "fail"
    summary = run_suite(suite, out, RunOptions(device="cpu", quiet=True))
    assert summary.ran == 4 and len(summary.failed) == 4
    recs = read_records(out)
    bad = [r for r in recs if r.get("status") == "failed"]
    assert len(bad) == 4 and all("k must be an int >= 2" in r["error"] for r in bad)
    assert all(r["config"]["task"]["options"]["k"] == 1 for r in bad)
    assert len(completed_ids(out / "results.jsonl")) == 4
    board = load_board(out)
    assert board.runs == 4 and {e.column for e in board.entries} == {3}
    write_leaderboard([out], out / "lb")
    again = run_suite(suite, out, RunOptions(device="cpu", quiet=True))  # failed runs are retried, finished ones are not
    assert again.already_done == 4 and again.ran == 0 and len(again.failed) == 4
    # A run that failed once and then finished counts once, with its finished record.
    ok = next(r for r in recs if r["status"] == "ok")
    retried = tmp_path / "retried"
    retried.mkdir()
    (retried / "suite.resolved.json").write_text((out / "suite.resolved.json").read_text())
    append_record(retried / "results.jsonl", {k: v for k, v in ok.items() if k != "metrics"} | {
        "status": "failed", "error": "worker died"})
    append_record(retried / "results.jsonl", ok)
    board = load_board(retried)
    assert board.runs == 1 and board.dropped == {"failed": 1}
    assert board.entries[0].summary.mean == pytest.approx(100 * ok["metrics"]["test"])


def test_cli_exit_code_1_when_runs_failed(tmp_path, data_root, capsys):
    path = tmp_path / "s.toml"
    path.write_text('[suite]\nname = "f"\n[defaults]\ndataset = "twin"\nmodel = "gat"\nnum_layers = 1\n'
                    'epochs = 2\nhidden_dim = 8\n[grid]\nk = [1]\n')
    assert main(["bench", str(path), "--quiet", "--out", str(tmp_path / "o"), "--no-leaderboard"]) == 1
    captured = capsys.readouterr()
    assert "0 run(s) done now" in captured.out and "1 failed" in captured.out
    assert "failed (recorded; a re-run retries it): ValueError: twin: k must be an int >= 2" in captured.err


def test_completed_ids_skip_failed_records(tmp_path):
    path = tmp_path / "results.jsonl"
    append_record(path, {"id": "a", "status": "ok"})
    append_record(path, {"id": "b", "status": "failed", "error": "boom"})
    append_record(path, {"id": "c"})  # records written before statuses existed are finished runs
    assert completed_ids(path) == {"a", "c"}


@pytest.mark.parametrize("argv,needle", [
    (["--shard", "4/3"], "--shard 4/3: need 1 <= I <= N"),
    (["--shard", "x"], "--shard takes I/N"),
    (["--executor", "ray", "--workers", "2"], "workers is for the process executor (--workers)"),
    (["--where", "modle=gat"], "did you mean 'model'"),
])
def test_bench_flag_errors_exit_2(argv, needle, capsys, tmp_path):
    assert main(["bench", "quick", "--quick", *argv, "--out", str(tmp_path / "o")]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "o" / "results.jsonl").exists()
