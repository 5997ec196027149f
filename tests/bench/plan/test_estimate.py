"""``zoo bench SUITE --estimate`` and ``zoo list suites`` (zoo.bench.plan.estimate)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from zoo.bench.plan import cost, cost_file
from zoo.bench.plan.estimate import (CommandCosts, estimate, expected_epochs_of, format_estimate, hours, makespan,
                                     run_seconds)

TABLE = cost.load_dataset_table()
MODEL = cost_file.load_cost_model("cpu")


def cell(cid, group, dataset="cora", layers=2, patience=None, epochs=1000):
    return SimpleNamespace(id=cid, group=group, config={
        "model": {"name": "gatv2", "norm": "none", "kwargs": {"num_layers": layers, "hidden_dim": 64}},
        "task": {"dataset": dataset, "options": {}},
        "train": {"epochs": epochs, "batch_size": 0, "patience": patience, "loss_threshold": 0.0},
        "run": {"dtype": "float32"}})


def value_of(config, key):
    return config["task"]["dataset"] if key == "dataset" else config["model"]["kwargs"].get(key)


def test_makespan_is_longest_first_on_the_least_loaded_worker():
    assert makespan([], 2) == 0
    assert makespan([5, 3, 3, 1], 1) == 12
    assert makespan([5, 3, 3, 1], 2) == 6
    assert makespan([1, 1, 1], 8) == 1


def test_slices_runs_groups_and_expected_epochs():
    groups = {"a": [cell("a0", "a"), cell("a1", "a")], "b": [cell("b0", "b", layers=10)],
              "c": [cell("c0", "c", "pubmed", patience=100)]}
    finished = [{"id": "x", "group": "x", "status": "ok", "epochs_run": 300,
                 "config": cell("x", "x", "pubmed", patience=100).config},
                {"id": "y", "group": "y", "status": "ok", "epochs_run": 500,
                 "config": cell("y", "y", "pubmed", patience=100).config}]
    est = estimate("s", "train", groups, MODEL, TABLE, value_of, finished=finished, done=["x", "y"], workers=2)
    keys = [s.where() for s in est.slices]
    assert keys == ["--where dataset=cora --where num_layers=2", "--where dataset=cora --where num_layers=10",
                    "--where dataset=pubmed --where num_layers=2"]
    cora2, cora10, pubmed = est.slices
    assert (cora2.runs, cora2.groups, cora2.expected_epochs) == (2, 1, 1000)
    assert cora10.cpu_seconds > cora2.cpu_seconds / 2          # 10 layers, half the replicas
    assert pubmed.expected_epochs == 400 and pubmed.done == 2  # the median of the finished (patience)
    assert est.runs == 4 and est.groups == 3
    # the two totals add the same terms in different orders: equal up to rounding when one worker is idle
    assert est.wall_seconds <= est.cpu_seconds * (1 + 1e-12) and est.wall_seconds >= max(s.cpu_seconds for s in est.slices)
    text = format_estimate(est, "zoo bench s")
    assert "total" in text and "--where dataset=pubmed --where num_layers=2" in text and "runs here" in text


def test_hours():
    assert [hours(s) for s in (5, 600, 7200, 5 * 86400)] == ["5 s", "10 min", "2.0 h", "5.0 d"]


def test_cli_estimate_runs_nothing(tmp_path, capsys):
    from zoo.cli import main

    out = tmp_path / "never"
    assert main(["bench", "balance_table2", "--estimate", "--where", "dataset=texas_npz,cornell_npz",
                 "--where", "num_layers=2,40", "--workers", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    lines = [ln for ln in text.splitlines() if ln.startswith("--where")]
    assert len(lines) == 4 and all(" 15 " in ln for ln in lines)
    assert "process with 2 worker(s)" in text and text.count("total") == 1
    # --shard estimates that shard only
    assert main(["bench", "balance_table2", "--estimate", "--where", "dataset=texas_npz", "--shard", "1/5",
                 "--out", str(out)]) == 0
    shard = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("--where")]
    assert len(shard) == 1 and " 15 " in shard[0]  # 5 texas groups over 5 shards: one group each


def test_cli_estimate_on_cuda_gives_gpu_time_from_the_cuda_entry(tmp_path, capsys):
    """``--estimate --device cuda``: the cuda entry's times (the H200's Cornell slice took 44 / 80 /
    132 s at L = 2 / 5 / 10 and about 8 min at L = 40 with 5 workers), headed GPU time, no CPU class."""
    from zoo.cli import main

    assert main(["bench", "balance_table2", "--estimate", "--where", "dataset=cornell_npz", "--device", "cuda",
                 "--workers", "5", "--out", str(tmp_path / "never")]) == 0
    text = capsys.readouterr().out
    assert ("on cuda (cost model: 5 trained groups in 2 records folder(s) on NVIDIA H200; provisional: fitted before "
            "the training loop was rebuilt") in text
    assert "GPU time" in text and "CPU time" not in text and "needs a GPU" not in text
    rows = {ln.split()[1]: ln.split() for ln in text.splitlines() if ln.startswith("--where")}
    # 38 s of group + 8 s of the process's start, 2 s of its exit and 1.5 s of leaderboard (the measured
    # slice: 44 s by its summary line, which holds neither the driver's start and exit nor the leaderboard)
    assert rows["num_layers=2"][5:7] == ["49", "s"] and rows["num_layers=40"][5:7] == ["9", "min"]


def test_list_suites_shows_runs_and_cpu_time(capsys, monkeypatch):
    from zoo.bench.suite import load
    from zoo.cli import main

    # two suites, not all: resolving every shipped suite takes ~10 s (each one's cells resolve in
    # tests/bench/suite/test_suite.py::test_shipped_suites_parse_in_both_forms)
    monkeypatch.setattr(load, "list_suites", lambda: ["balance_table2", "quick"])
    assert main(["list", "suites"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("balance_table2"))
    assert "675 runs" in line and line.split()[-4:-3] in (["h"], ["d"]) and line.endswith("of CPU time")
    quick = next(ln for ln in text.splitlines() if ln.strip().startswith("quick")).split()
    assert quick[-4] in ("s", "min") and quick[-5] != "0"  # minutes, not "0.0 CPU-hours"


def test_a_command_pays_its_processes_start_and_exit_and_its_leaderboard():
    """Outside its groups a command pays each process's start (imports) and exit (their teardown), once
    per process, and the leaderboard once at the end."""
    start, exit_, report = MODEL.process_start_s, MODEL.process_exit_s, MODEL.report_s
    assert start == cost.PROCESS_START_S > 0 and exit_ == cost.PROCESS_EXIT_S > 0 and report == cost.REPORT_S > 0
    one = estimate("s", "train", {"a": [cell("a0", "a", epochs=1)]}, MODEL, TABLE, value_of, workers=1)
    group = one.slices[0].group_seconds[0]
    assert one.wall_seconds == pytest.approx(group + start + exit_ + report)
    assert one.cpu_seconds == pytest.approx(group + start + exit_ + report)
    groups = {g: [cell(f"{g}0", g, epochs=1)] for g in "abc"}
    two = estimate("s", "train", groups, MODEL, TABLE, value_of, workers=2, executor="process")
    seconds = [g for s in two.slices for g in s.group_seconds]
    # the driver, then two workers starting (and at the end exiting) side by side; CPU: all three processes
    assert two.wall_seconds == pytest.approx(makespan(seconds, 2) + 2 * (start + exit_) + report)
    assert two.cpu_seconds == pytest.approx(sum(seconds) + 3 * (start + exit_) + report)
    assert "8 s + 2 s per process" in format_estimate(two, "zoo bench s")
    quiet = estimate("s", "train", groups, MODEL, TABLE, value_of, workers=2, executor="process", report=False)
    assert quiet.wall_seconds == pytest.approx(two.wall_seconds - report)
    assert "leaderboard" in format_estimate(two, "zoo bench s") and "leaderboard" not in format_estimate(quiet, "s")


def test_run_seconds_spawns_no_more_workers_than_groups():
    costs = CommandCosts(8.0, 2.0, 1.0)
    assert run_seconds([], 2, "process", costs) == (0.0, 0.0)
    assert run_seconds([10.0], 2, "process", costs) == (21.0, 21.0)  # one group: `--workers auto` runs it in the driver
    assert run_seconds([10.0, 4.0], 2, "process", costs) == (45.0, 31.0)
    assert run_seconds([10.0, 4.0], 2, "local", costs) == (25.0, 25.0)


def test_cli_estimate_without_leaderboard_leaves_out_the_report(tmp_path, capsys):
    from zoo.cli import main

    args = ["bench", "quick", "--estimate", "--workers", "2", "--out", str(tmp_path / "never")]
    assert main(args) == 0
    assert "for the leaderboard" in capsys.readouterr().out
    assert main(args + ["--no-leaderboard"]) == 0
    assert "for the leaderboard" not in capsys.readouterr().out


def test_a_cost_files_measured_constants_are_read_and_kept_by_calibrate(tmp_path):
    path = tmp_path / "cost_model.json"
    path.write_text('{"devices": {"cpu": {"coefficients": {"dense_macs": 1e-11}, "process_start_s": 3.5, '
                    '"process_exit_s": 0.5, "report_s": 0.25}}}')
    for device in ("cpu", "cuda"):  # no cuda entry: the cpu one
        m = cost_file.load_cost_model(device, path)
        assert (m.process_start_s, m.process_exit_s, m.report_s, m.unseen_suite_factor) == (3.5, 0.5, 0.25, 1.0)
    refit = cost.CostModel({"dense_macs": 2e-11}, {"s": 2.0}, "cpu", "refit", unseen_suite_factor=1.75)
    cost_file.write_model([refit], path, {})
    m = cost_file.load_cost_model("cpu", path)  # measured, not fitted: kept; the fitted factor: written
    assert (m.process_start_s, m.process_exit_s, m.report_s, m.unseen_suite_factor) == (3.5, 0.5, 0.25, 1.75)


def test_expected_epochs_of_uses_finished_groups_only_where_training_stops_early():
    def rec(gid, epochs, patience, status="ok"):
        return {"id": gid + str(epochs), "group": gid, "status": status, "epochs_run": epochs,
                "config": cell("r", gid, "pubmed", patience=patience).config}
    key_of = lambda c: (value_of(c, "dataset"), value_of(c, "num_layers"))  # noqa: E731
    finished = [rec("g1", 200, 100), rec("g1", 300, 100), rec("g2", 500, 100), rec("g3", 50, 100, "failed")]
    epochs_of = expected_epochs_of(finished, key_of)
    assert epochs_of(cell("p", "p", "pubmed", patience=100).config) == 400   # groups g1 (300) and g2 (500)
    assert epochs_of(cell("p", "p", "pubmed").config) == 1000                # no early stop: the cap
    assert epochs_of(cell("c", "c", "cora", patience=100).config) == 400     # none in its slice: pubmed's, trained alike
    assert epochs_of(cell("c", "c", "cora", patience=7).config) == 1000      # none trained alike anywhere: the cap


def test_a_slice_not_run_yet_stops_as_the_suites_groups_trained_alike():
    """oxford_table4's pending Amazon Computers and Coauthor CS slices were priced at the 2 000-epoch cap
    while every finished group of the suite, trained by the same table, stopped by patience at 280-1 300
    epochs: a slice without records takes the median of the other slices' groups trained alike (its own,
    where it has some, first); a training table that no group shares still takes the cap."""
    def rec(gid, dataset, epochs, patience=100):
        return {"id": gid, "group": gid, "status": "ok", "epochs_run": epochs,
                "config": cell(gid, gid, dataset, patience=patience, epochs=2000).config}
    key_of = lambda c: (value_of(c, "dataset"), value_of(c, "num_layers"))  # noqa: E731
    finished = [rec("c1", "cora", 800), rec("c2", "cora", 900), rec("p1", "pubmed", 450), rec("q1", "citeseer", 700, 50)]
    epochs_of = expected_epochs_of(finished, key_of)
    assert epochs_of(cell("a", "a", "amazon_computers", patience=100, epochs=2000).config) == 800  # cora + pubmed
    assert epochs_of(cell("b", "b", "pubmed", patience=100, epochs=2000).config) == 450            # its own slice
    assert epochs_of(cell("d", "d", "amazon_computers", patience=30, epochs=2000).config) == 2000  # none alike


def test_expected_epochs_of_prefers_the_slice_groups_trained_alike():
    """One slice, two training tables: groups trained with Adam stopped early, the SGD group ran to its
    cap. A pending Adam cell is expected to stop as the Adam groups did, not at the median of all
    three (balance_table3_4's Cora L = 10 slice: SGD to 5 000 epochs, Adam at 1 101); a training
    table the slice has not finished yet takes the slice's median."""
    def adam(c):
        c.config["train"]["optimizer"] = "adam"
        return c

    def rec(gid, epochs, c):
        return {"id": gid, "group": gid, "status": "ok", "epochs_run": epochs, "config": c.config}
    key_of = lambda c: (value_of(c, "dataset"), value_of(c, "num_layers"))  # noqa: E731
    finished = [rec("a1", 100, adam(cell("a1", "a1", patience=50))), rec("a2", 200, adam(cell("a2", "a2", patience=50))),
                rec("s1", 1000, cell("s1", "s1", patience=50))]
    epochs_of = expected_epochs_of(finished, key_of)
    assert epochs_of(adam(cell("p", "p", patience=50)).config) == 150          # the Adam groups' median
    assert epochs_of(cell("q", "q", patience=50).config) == 1000               # the SGD group
    other = cell("r", "r", patience=50)
    other.config["train"]["lr"] = 0.5
    assert epochs_of(other.config) == 200                                      # none alike: the slice's median
