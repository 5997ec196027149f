"""The cost model fitted on what a CPU group consumed (``group_cpu_time_s``), not on the wall time a
loaded machine stretched: records that carry it, records that do not, and ``zoo bench calibrate``
saying how many groups had each."""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import replace

import pytest

from tests.bench.plan.test_cost import TABLE, config, synthetic_observations
from zoo.bench.plan import calibration, cost
from zoo.cli import bench_calibrate

TRUTH = [2e-11, 4e-10, 1e-8, 1e-3]
LOAD = 3.0  # the wall time of a group on the loaded machine: 3x its CPU time


def _on_loaded_machine(obs, measured):
    """``obs`` (times = the model's, exactly) as CPU time of groups whose wall time was ``LOAD`` x longer;
    the first ``measured`` carry their CPU time, the others only their wall time."""
    return [replace(o, wall_time_s=LOAD * o.wall_time_s, cpu_time_s=o.wall_time_s if i < measured else None)
            for i, o in enumerate(obs)]


def test_observations_carry_the_cpu_time_of_cpu_records_only():
    rec = {"status": "ok", "suite": "s", "group": "g", "group_wall_time_s": 10.0, "group_cpu_time_s": 4.0,
           "group_size": 1, "config": config(), "epochs_run": 40, "stop_reason": "max_epochs",
           "device": "cpu (x86_64, 2 cores)"}
    legacy = {k: v for k, v in rec.items() if k != "group_cpu_time_s"} | {"group": "h"}
    gpu = {**rec, "group": "k", "device": "NVIDIA H200"}  # a GPU's cost is its wall time, whatever it carries
    by = {o.group: o for o in calibration.observations([rec, legacy, gpu])}
    assert (by["g"].cpu_time_s, by["g"].seconds) == (4.0, 4.0)
    assert (by["h"].cpu_time_s, by["h"].seconds) == (None, 10.0)
    assert (by["k"].cpu_time_s, by["k"].seconds) == (None, 10.0)


def test_a_fit_on_mixed_records_is_on_the_cpu_time_scale():
    """Half the groups carry their CPU time, half only a wall time 3x longer: the groups without it take
    the measured CPU / wall share, so the fit recovers the CPU-time coefficients (on wall time, or with
    the wall-only groups taken as they are, it would not)."""
    obs = synthetic_observations(TRUTH)
    mixed, basis = calibration.time_basis(_on_loaded_machine(obs, len(obs) // 2))
    assert (basis.cpu, basis.wall, basis.share) == (len(obs) // 2, len(obs) - len(obs) // 2, pytest.approx(1 / LOAD))
    model = calibration.fit(mixed, TABLE, per_suite=False)
    for term, value in zip(cost.TERMS, TRUTH):
        assert model.coefficients[term] == pytest.approx(value, rel=1e-6)
    on_wall, _ = calibration.time_basis(_on_loaded_machine(obs, len(obs) // 2), "wall")
    assert calibration.fit(on_wall, TABLE, per_suite=False).coefficients["dense_macs"] == pytest.approx(
        LOAD * TRUTH[0], rel=1e-6)
    assert "18 groups on their CPU time" in basis.describe() and "18 without it" in basis.describe()


def test_groups_run_again_with_their_cpu_time_set_the_share_of_the_others():
    """Earlier records: wall only, from slower code (2x) on a loaded machine (3x). Six of their groups run
    again with the new code on a less loaded machine (wall 1.5x its CPU time): the share matched on those
    six (CPU time now / wall time then) puts every other group on the new code's CPU time; the re-run
    groups' own CPU / wall share would not (it knows neither the earlier load nor the speed-up)."""
    obs = synthetic_observations(TRUTH)
    earlier = [replace(o, wall_time_s=2 * LOAD * o.wall_time_s) for o in obs]
    again = [replace(o, wall_time_s=1.5 * o.wall_time_s, cpu_time_s=o.wall_time_s) for o in obs[:6]]
    fitted, basis = calibration.time_basis(earlier + again)
    assert (basis.cpu, basis.wall, basis.matched, basis.share) == (6, 30, 6, pytest.approx(1 / (2 * LOAD)))
    assert len({(o.suite, o.group) for o in fitted}) == len(fitted) == 36  # a group run again counts once
    model = calibration.fit(fitted, TABLE, per_suite=False)
    for term, value in zip(cost.TERMS, TRUTH):
        assert model.coefficients[term] == pytest.approx(value, rel=1e-6)
    assert "run again (6 groups: s x0.167;" in basis.describe()
    assert calibration.wall_shares(earlier[6:] + again) == ({}, pytest.approx(1 / 1.5), 0)  # none matched: their own


def test_each_suite_run_again_takes_its_own_share():
    """The load and the speed-up differ between suites: a suite with groups run again takes its own
    share, a suite without the median of those."""
    obs = synthetic_observations(TRUTH)

    def suite(name, slower, rerun):
        earlier = [replace(o, suite=name, wall_time_s=slower * o.wall_time_s) for o in obs]
        return earlier + [replace(o, suite=name, cpu_time_s=o.wall_time_s) for o in obs[:rerun]]

    fitted, basis = calibration.time_basis(suite("a", 6.0, 6) + suite("b", 2.0, 3) + suite("c", 4.0, 0))
    assert basis.suites == {"a": pytest.approx(1 / 6), "b": pytest.approx(1 / 2)}
    assert basis.share == pytest.approx(1 / 3) and basis.matched == 9
    assert {o.suite: o.wall_share for o in fitted if o.cpu_time_s is None} == {
        "a": pytest.approx(1 / 6), "b": pytest.approx(1 / 2), "c": pytest.approx(1 / 3)}
    model = calibration.fit([o for o in fitted if o.suite != "c"], TABLE, per_suite=False)
    assert model.coefficients["edge_elements"] == pytest.approx(TRUTH[1], rel=1e-6)


def test_time_basis_choices():
    obs = _on_loaded_machine(synthetic_observations(TRUTH), 5)
    measured, basis = calibration.time_basis(obs, "cpu")
    assert len(measured) == 5 and (basis.cpu, basis.wall) == (5, 0) and basis.quantity() == "CPU time"
    walls, basis = calibration.time_basis(obs, "wall")
    assert [o.seconds for o in walls] == [o.wall_time_s for o in obs] and basis.quantity() == "wall time"
    assert "no record carries group_cpu_time_s" in calibration.time_basis(walls)[1].describe()
    with pytest.raises(cost.CostModelError, match="unknown time basis"):
        calibration.time_basis(obs, "both")


def test_leave_one_out_names_what_it_predicts_and_scores_the_measured_groups_alone():
    obs = synthetic_observations(TRUTH)
    measured, _ = calibration.time_basis(_on_loaded_machine(obs, len(obs)))
    assert "R^2 (log CPU time) 1.00" in calibration.leave_one_out(measured, TABLE, per_suite=False).describe()
    assert calibration.measured_only(measured, [o.seconds for o in measured]) is None  # all measured: the same
    mixed, _ = calibration.time_basis(_on_loaded_machine(obs, 6))
    predicted = calibration.leave_one_out_predictions(mixed, TABLE, per_suite=False)
    alone = calibration.measured_only(mixed, predicted)
    assert alone.groups == 6 and "(log measured CPU time)" in alone.describe()
    assert "(log CPU time; 30 from wall)" in calibration.leave_one_out(mixed, TABLE, False).describe()


def _records(obs, device="cpu (x86_64, 2 cores)"):
    return [{"status": "ok", "suite": o.suite, "group": o.group, "id": o.group, "config": o.config,
             "group_size": o.replicas, "epochs_run": o.epochs, "stop_reason": "max_epochs", "device": device,
             "group_wall_time_s": o.wall_time_s,
             **({"group_cpu_time_s": o.cpu_time_s} if o.cpu_time_s is not None else {})} for o in obs]


def _calibrate(tmp_path, rows, *extra, folders=None):
    """``zoo bench calibrate`` of ``rows`` in one records folder (or ``folders``: name -> rows)."""
    paths = []
    for name, part in (folders or {"records": rows}).items():
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
        paths.append(str(tmp_path / name))
    args = bench_calibrate.parser().parse_args([*paths, "--out", str(tmp_path / "model.json"), *extra])
    return args.handler(args)


def test_calibrate_matches_groups_run_again_across_folders(tmp_path, capsys):
    obs = synthetic_observations(TRUTH)
    earlier = _records([replace(o, wall_time_s=2 * LOAD * o.wall_time_s) for o in obs])
    again = _records([replace(o, wall_time_s=1.5 * o.wall_time_s, cpu_time_s=o.wall_time_s) for o in obs[:6]])
    assert _calibrate(tmp_path, None, "--no-suite-factors", folders={"earlier": earlier, "again": again}) == 0
    entry = json.loads((tmp_path / "model.json").read_text())["devices"]["cpu"]
    assert entry["fitted_on"].startswith("36 trained groups in 2 records folder(s)")
    assert "run again (6 groups: s x0.167;" in entry["time_basis"]
    assert entry["coefficients"]["dense_macs"] == pytest.approx(TRUTH[0], rel=1e-6)


def test_calibrate_states_how_many_groups_had_each_time(tmp_path, capsys):
    obs = _on_loaded_machine(synthetic_observations(TRUTH), 8)
    assert _calibrate(tmp_path, _records(obs), "--no-suite-factors") == 0
    entry = json.loads((tmp_path / "model.json").read_text())["devices"]["cpu"]
    assert ("8 groups on their CPU time (group_cpu_time_s), 28 without it on their wall time x 0.333"
            in entry["time_basis"])
    assert entry["fitted_on"].endswith("; times: CPU (8 measured, 28 their wall x 0.333)")
    assert entry["coefficients"]["dense_macs"] == pytest.approx(TRUTH[0], rel=1e-6)
    assert entry["leave_one_out_measured_cpu"].startswith("8 groups: median error x1.00")
    assert "of which the groups with a measured CPU time: 8 groups" in capsys.readouterr().out


def test_calibrate_on_a_gpu_stays_on_wall_time(tmp_path, capsys):
    obs = _on_loaded_machine(synthetic_observations(TRUTH), 36)
    assert _calibrate(tmp_path, _records(obs, "NVIDIA H200"), "--device", "cuda", "--no-suite-factors") == 0
    entry = json.loads((tmp_path / "model.json").read_text())["devices"]["cuda"]
    assert entry["fitted_on"].endswith("; times: wall") and "all 36 groups on their wall time" in entry["time_basis"]
    assert entry["coefficients"]["dense_macs"] == pytest.approx(LOAD * TRUTH[0], rel=1e-6)
    assert _calibrate(tmp_path, _records(obs, "NVIDIA H200"), "--device", "cuda", "--time", "cpu") != 0
    assert "its wall time" in capsys.readouterr().err


def test_a_suites_level_is_set_by_its_measured_groups():
    """A suite's earlier groups carry only a wall time, and the share that put them on the CPU-time scale
    got their load wrong (2.5x too high); six of its groups were measured (their CPU time). The wall-time
    groups still shape the coefficients, but the suite's factor comes from the measured groups: they are
    predicted at their CPU time (geometric mean), not 2.5^(30/36) ~ 2.1x above it (the factor of all 36)."""
    obs = synthetic_observations(TRUTH)
    mixed = [replace(o, wall_time_s=2.5 * o.wall_time_s) for o in obs[6:]] + \
        [replace(o, wall_time_s=1.5 * o.wall_time_s, cpu_time_s=o.wall_time_s) for o in obs[:6]]
    model = calibration.fit(mixed, TABLE)
    measured = [o for o in mixed if o.cpu_time_s is not None]
    ratios = [model.group_seconds([o.config] * o.replicas, o.epochs, TABLE, o.mode, o.suite) / o.seconds
              for o in measured]
    assert math.exp(sum(math.log(r) for r in ratios) / len(ratios)) == pytest.approx(1.0, rel=1e-6)


def test_a_datasets_level_is_set_by_its_measured_groups_in_every_suite():
    """One dataset's groups take 3x what the counts price, in both suites that train on it (PubMed sat at
    0.4-0.8 of its measured CPU time in every suite): a suite's one level cannot price it and the other
    datasets' groups both, a level per dataset, fitted on the measured groups, can; a dataset without
    measured groups keeps a factor of 1."""
    obs = synthetic_observations(TRUTH)

    def measured(o, suite):
        slow = 3.0 if o.config["task"]["dataset"] == "texas_npz" else 1.0
        return replace(o, suite=suite, wall_time_s=slow * o.wall_time_s, cpu_time_s=slow * o.wall_time_s)
    both = [measured(o, s) for s in ("a", "b") for o in obs]
    model = calibration.fit(both, TABLE)

    def geo(dataset):
        ratios = [model.group_seconds([o.config] * o.replicas, o.epochs, TABLE, o.mode, o.suite) / o.seconds
                  for o in both if o.config["task"]["dataset"] == dataset]
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    for dataset in ("cora", "citeseer", "texas_npz"):
        assert geo(dataset) == pytest.approx(1.0, rel=0.1)   # one level per suite alone: cora 1.21, texas 0.68
    assert model.dataset_factors["texas_npz"] > 1.2 * model.dataset_factors["cora"]
    assert "pubmed" not in model.dataset_factors
    unmeasured = calibration.fit([replace(o, cpu_time_s=None) for o in both], TABLE)
    assert unmeasured.dataset_factors == {}


def test_a_shapes_level_is_set_by_its_measured_groups():
    """One shape (a dataset's deep stack of one family) takes 2.4x what the counts price, in a suite whose
    other shapes on the same graph take what they price (subnormal numbers past some depth: balance_table2's
    Chameleon L = 40 GATv2 took 2.4x its flushed CPU time, its L = 5 stack 1.0x): neither the suite's nor
    the dataset's level can price both, a level per shape, fitted on its measured groups, can; a shape
    without measured groups keeps a factor of 1."""
    obs = synthetic_observations(TRUTH)

    def measured(o):
        c = o.config
        slow = 2.4 if (c["task"]["dataset"], c["model"]["name"], c["model"]["kwargs"]["num_layers"]) == \
            ("citeseer", "gatv2", 5) else 1.0
        return replace(o, wall_time_s=slow * o.wall_time_s, cpu_time_s=slow * o.wall_time_s)
    groups = [measured(o) for o in obs]
    model = calibration.fit(groups, TABLE)
    without = replace(model, shape_factors={})  # the levels of suite and dataset alone

    def ratio(m, o):
        return m.group_seconds([o.config] * o.replicas, o.epochs, TABLE, o.mode, o.suite) / o.seconds
    for o in groups:
        if o.cpu_time_s != o.wall_time_s or o.config["model"]["kwargs"]["num_layers"] != 5 or \
                o.config["model"]["name"] != "gatv2" or o.config["task"]["dataset"] != "citeseer":
            continue
        assert ratio(without, o) < 0.6 and ratio(model, o) > 0.75  # two groups, shrunk by 2 / (2 + 1) of the log
    others = [ratio(model, o) for o in groups if cost.shape_key(o.config, o.suite) != "s|citeseer|5|gatv2|none"]
    assert max(max(r, 1 / r) for r in others) < 1.1
    slow = cost.shape_key(config("citeseer", "gatv2", layers=5), "s")
    assert model.shape_factors[slow] > 1.5 * model.shape_factors[cost.shape_key(config("citeseer", "gatv2"), "s")]
    assert cost.shape_key(config("pubmed"), "s") not in model.shape_factors
    assert calibration.fit([replace(o, cpu_time_s=None) for o in groups], TABLE).shape_factors == {}


def test_long_runs_price_their_depths_pending_long_runs_above_the_probes_rate():
    """Probes (100 epochs) of every shape, and long runs (5 000 epochs) of one depth-5 shape whose epochs
    cost 2.5x its probes' on average (a deep stack's parameters turn subnormal late: nonlocal_accuracy's Cora
    L = 32 Pre-LN SAN took ~3x its first epochs' rate over 5 000 epochs).  A pending long run of another
    depth-5 shape, probed only, is priced above its probes' rate (without the long-run factor: at it, 1.0x),
    and the long runs themselves near their time (without it: ~0.6x, their shape's level set by them and its
    probes together); the probes stay near theirs and the depth-2 shapes get no factor."""
    obs = [replace(o, cpu_time_s=o.wall_time_s) for o in synthetic_observations(TRUTH)]
    slow = [o for o in obs if o.config["model"]["name"] == "gcn" and o.config["model"]["kwargs"]["num_layers"] == 5]
    runs = [replace(o, group=o.group + "-long", epochs=5000, wall_time_s=2.5 * o.wall_time_s * 5001 / 101,
                    cpu_time_s=2.5 * o.wall_time_s * 5001 / 101) for o in slow]
    model = calibration.fit(obs + runs, TABLE)
    assert set(model.long_run_factors) == {"s|5"} and model.long_run_factors["s|5"] > 1.8

    def ratio(o, epochs=None, m=model):
        return m.group_seconds([o.config] * o.replicas, epochs or o.epochs, TABLE, o.mode, o.suite) / o.seconds
    pending = [o for o in obs if o.config["model"]["name"] == "gat" and o.config["model"]["kwargs"]["num_layers"] == 5]
    assert all(ratio(o, 5000) * 101 / 5001 > 1.8 for o in pending)
    assert all(0.85 < ratio(o) < 1.15 for o in runs)  # without the factor: 0.58-0.61
    assert max(max(ratio(o), 1 / ratio(o)) for o in obs) < 1.15
    shallow = [o for o in obs if o.config["model"]["kwargs"]["num_layers"] == 2]
    assert all(ratio(o, 5000) * 101 / 5001 == pytest.approx(ratio(o), rel=1e-9) for o in shallow)
    unmeasured = calibration.fit([replace(o, cpu_time_s=None) for o in obs + runs], TABLE)
    assert unmeasured.long_run_factors == {}


def test_a_long_runs_factor_compares_it_with_its_own_shapes_probes():
    """Long runs (5 000 epochs) of one depth-5 shape at 2.5x its probes' rate, and the other depth-5 shapes
    probed again after a speed-up (0.4x their first probes' time, the old probes gone): the depth's factor is
    the long runs' over their own shape's probes (~2.5 shrunk), not over all the depth's probes (which would
    read the other shapes' speed-up as lateness: above 3)."""
    obs = [replace(o, cpu_time_s=o.wall_time_s) for o in synthetic_observations(TRUTH)]

    def faster(o):
        c = o.config["model"]
        if c["kwargs"]["num_layers"] != 5 or c["name"] == "gcn":
            return o
        return replace(o, wall_time_s=0.4 * o.wall_time_s, cpu_time_s=0.4 * o.cpu_time_s)
    slow = [o for o in obs if o.config["model"]["name"] == "gcn" and o.config["model"]["kwargs"]["num_layers"] == 5]
    runs = [replace(o, group=o.group + "-long", epochs=5000, wall_time_s=2.5 * o.wall_time_s * 5001 / 101,
                    cpu_time_s=2.5 * o.wall_time_s * 5001 / 101) for o in slow]
    model = calibration.fit([faster(o) for o in obs] + runs, TABLE)
    assert 1.8 < model.long_run_factors["s|5"] < 2.4


def test_two_lengths_of_one_group_count_as_their_difference():
    """A probe pays once what its epochs do not (the first touch of its heap, one-off checks): two runs of
    one group by the same code, 5 and 20 epochs, each with 10 s of it, count as one group of 15 epochs
    on the difference of their times; the fit then prices the epochs alone (as a run of thousands pays
    them), where the 5-epoch probe alone would put 10 / 6 s more on each of its epochs.  Other code's
    runs, or other configurations, are not paired."""
    o = synthetic_observations(TRUTH)[0]
    per_epoch = o.wall_time_s / (o.epochs + 1)

    def run(epochs, commit="abc", cfg=o.config):
        cfg = {**cfg, "train": {**cfg["train"], "epochs": epochs}}
        t = 10.0 + per_epoch * (epochs + 1)
        return replace(o, group=f"g{epochs}{commit}", config=cfg, epochs=epochs, wall_time_s=2 * t, cpu_time_s=t,
                       commit=commit)
    obs, _ = calibration.time_basis([run(5), run(20)])
    assert len(obs) == 1 and obs[0].epochs == 14 and obs[0].cpu_time_s == pytest.approx(15 * per_epoch)
    assert obs[0].group == "g20abc"
    assert len(calibration.time_basis([run(5), run(20, "other")])[0]) == 2
    other = {**o.config, "model": {**o.config["model"], "kwargs": {**o.config["model"]["kwargs"], "heads": 2}}}
    assert len(calibration.time_basis([run(5), run(20, cfg=other)])[0]) == 2
    three, _ = calibration.time_basis([run(20), run(5), run(10)])  # each longer one less the shortest
    assert sorted((o.epochs, round(o.cpu_time_s / per_epoch, 6)) for o in three) == [(4, 5.0), (14, 15.0)]
