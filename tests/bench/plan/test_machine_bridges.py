"""Records measured on two CPUs, priced on one: each group's machine (``float_order``), the machine factors
that bridges (one shape run by one commit on both machines) set, and ``zoo bench calibrate --bridge``."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.bench.plan.test_cost import TABLE, synthetic_observations
from zoo.bench.plan import bridges, calibration, cost
from zoo.cli import bench_calibrate
from zoo.cli.errors import EXIT_ERROR

TRUTH = [2e-11, 4e-10, 1e-8, 1e-3]
XEON = {"cpu": "Intel(R) Xeon(R) Processor", "isa": ["avx2", "avx512f", "amx_tile"]}
EPYC = {"cpu": "AMD EPYC", "isa": ["avx2", "avx512f"]}
OLD_EPYC = {"cpu": "AMD EPYC", "isa": ["avx", "avx2", "fma"]}
XEON_KEY, EPYC_KEY = "Intel(R) Xeon(R) Processor, avx512f", "AMD EPYC, avx512f"


def _measured():
    """The synthetic groups (times exactly the model's) as measured CPU time on the Xeon."""
    return [replace(o, cpu_time_s=o.wall_time_s, machine=XEON_KEY, commit="new")
            for o in synthetic_observations(TRUTH)]


def _run(o, epochs, rate, setup, machine, commit="old"):
    """``o``'s configuration run for ``epochs`` on ``machine``: ``setup`` CPU-s once, ``rate`` a replica-epoch."""
    cfg = {**o.config, "train": {**o.config["train"], "epochs": epochs}}
    t = setup + rate * (epochs + 1) * o.replicas
    return replace(o, group=f"{o.group}-{epochs}-{machine}-{commit}", config=cfg, epochs=epochs, wall_time_s=t,
                   cpu_time_s=t, machine=machine, commit=commit)


def _pair(o, rate, setup, machine, commit="old"):
    return [_run(o, 2, rate, setup, machine, commit), _run(o, 8, rate, setup, machine, commit)]


def test_each_group_knows_its_machine():
    rec = {"status": "ok", "suite": "s", "group": "g", "group_wall_time_s": 10.0, "group_cpu_time_s": 4.0,
           "group_size": 1, "config": synthetic_observations(TRUTH)[0].config, "epochs_run": 40,
           "device": "cpu (x86_64, 2 cores)"}
    keys = [calibration.machine_key({**rec, "float_order": f}) for f in (XEON, EPYC, OLD_EPYC, {}, None)]
    assert keys == [XEON_KEY, EPYC_KEY, "AMD EPYC, no avx512f", "unknown", "unknown"]
    assert calibration.observations([{**rec, "float_order": EPYC}])[0].machine == EPYC_KEY


def test_two_lengths_on_two_machines_are_not_one_pair():
    o = _measured()[0]
    obs = [_run(o, 2, 1.0, 5.0, XEON_KEY), _run(o, 8, 2.0, 5.0, EPYC_KEY)]
    assert calibration.without_setup(obs) == obs


def test_a_bridges_factor_is_the_setup_free_rates_ratio():
    """One shape, one commit, a probe pair on each machine: the EPYC's epochs take 1.5x the Xeon's and its
    one-off setup 3x; the factor is the epochs' 1.5 (the groups as run would read 1.5-2.1x)."""
    o = _measured()[0]
    epyc = _pair(o, 1.5e-3, 30.0, EPYC_KEY)
    factors = bridges.find_bridges(_measured() + _pair(o, 1e-3, 10.0, XEON_KEY), {"epyc": epyc})
    assert factors.reference == XEON_KEY
    (b,) = factors.bridges
    assert (b.machine, b.shape, b.commit, b.basis) == (EPYC_KEY, cost.shape_key(o.config, "s"), "old", "pairs")
    assert b.factor == pytest.approx(1.5, rel=1e-9)
    single = bridges.find_bridges(_measured(), {"epyc": [epyc[1]], "xeon": [_run(o, 8, 1e-3, 10.0, XEON_KEY)]})
    assert single.bridges[0].basis == "8 epochs" and single.bridges[0].factor != pytest.approx(1.5, rel=1e-3)


def test_a_bridged_machines_groups_are_divided_by_their_shapes_factor_else_the_median():
    """Three bridged shapes (1.2x, 1.5x, 2.0x): a group of a bridged shape takes its shape's own factor,
    another shape the median (1.5); the reference machine's groups, and those of a machine without a bridge,
    stay as they are."""
    obs = _measured()
    shapes = {}
    for o in obs:
        shapes.setdefault(cost.shape_key(o.config, o.suite), o)
    bridged = list(shapes.values())[:3]
    folder = [r for o, f in zip(bridged, (1.2, 1.5, 2.0)) for r in _pair(o, f * 1e-3, 5.0, EPYC_KEY)]
    xeon = [r for o in bridged for r in _pair(o, 1e-3, 5.0, XEON_KEY)]
    factors = bridges.find_bridges(obs, {"epyc": folder, "xeon": xeon})
    assert factors.machine_factor(EPYC_KEY) == pytest.approx(1.5)
    slow = replace(bridged[2], machine=EPYC_KEY, cpu_time_s=6.0, wall_time_s=8.0)
    other = replace(list(shapes.values())[5], machine=EPYC_KEY, cpu_time_s=6.0, wall_time_s=8.0)
    old = replace(other, machine="AMD EPYC, no avx512f")
    out = factors.normalise([slow, other, old, obs[0]])
    assert (out[0].cpu_time_s, out[0].wall_time_s) == (pytest.approx(3.0), pytest.approx(4.0))  # its own 2.0
    assert (out[1].cpu_time_s, out[1].wall_time_s) == (pytest.approx(4.0), pytest.approx(8.0 / 1.5))
    assert out[2] is old and out[3] is obs[0]
    summary = factors.summary([slow, other, old, obs[0]])
    assert summary[1] == (f"{EPYC_KEY}: 2 groups, 3 bridges (3 shapes), factor min 1.200, median 1.500, max 2.000; "
                          "1 groups divided by their shape's own factor, 1 by the median")
    assert summary[2] == "AMD EPYC, no avx512f: 1 groups, no bridge: at face value"


def _records(obs, float_order):
    return [{"status": "ok", "suite": o.suite, "group": o.group, "id": o.group, "config": o.config,
             "group_size": o.replicas, "epochs_run": o.epochs, "stop_reason": "max_epochs",
             "device": "cpu (x86_64, 2 cores)", "group_wall_time_s": o.wall_time_s, "group_cpu_time_s": o.cpu_time_s,
             "commit": o.commit, "float_order": float_order} for o in obs]


def _calibrate(tmp_path, folders, *extra):
    paths = {}
    for name, rows in folders.items():
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths[name] = str(tmp_path / name)
    argv = [paths[n] if n in paths else n for n in extra]
    args = bench_calibrate.parser().parse_args([*argv, "--out", str(tmp_path / "model.json"), "--no-suite-factors"])
    code = args.handler(args)
    return code, (json.loads((tmp_path / "model.json").read_text())["devices"]["cpu"] if code == 0 else None)


def _two_machines():
    """24 groups on the Xeon, 12 (other shapes) on the EPYC at 1.5x, and a bridge pair of one EPYC shape at
    commit ``old`` on each machine (the Xeon's pair in a probe folder that is also a records folder)."""
    obs = _measured()
    epyc = [replace(o, machine=EPYC_KEY, cpu_time_s=1.5 * o.cpu_time_s, wall_time_s=1.5 * o.wall_time_s)
            for o in obs[24:]]
    folders = {"xeon": _records(obs[:24], XEON), "epyc": _records(epyc, EPYC),
               "xeon-probe": _records(_pair(obs[30], 1e-3, 10.0, XEON_KEY), XEON),
               "epyc-bridge": _records(_pair(obs[30], 1.5e-3, 20.0, EPYC_KEY), EPYC)}
    return folders


def test_calibrate_divides_a_bridged_machines_groups_and_fits_no_bridge_folder(tmp_path, capsys):
    code, entry = _calibrate(tmp_path, _two_machines(), "xeon", "epyc", "xeon-probe",
                             "--bridge", "xeon-probe", "epyc-bridge")
    assert code == 0
    assert entry["fitted_on"].startswith("36 trained groups in 2 records folder(s)")  # the probe pair: a bridge only
    assert entry["fitted_on"].endswith(f"; priced on {XEON_KEY} (1 bridges)")
    for term, value in zip(cost.TERMS, TRUTH):
        assert entry["coefficients"][term] == pytest.approx(value, rel=1e-6)
    out = capsys.readouterr().out
    assert "2 bridge folder(s), 1 of them also given as records (not fitted)" in out
    assert f"  {XEON_KEY}: 24 groups, the reference machine (the model prices it)" in out
    assert f"  {EPYC_KEY}: 12 groups, 1 bridges (1 shapes), factor min 1.500, median 1.500, max 1.500" in out
    assert entry["machines"].startswith(f"{XEON_KEY}: 24 groups")


def test_calibrate_without_bridges_fits_every_machine_at_face_value(tmp_path, capsys):
    folders = _two_machines()
    code, entry = _calibrate(tmp_path, folders, "xeon", "epyc")
    assert code == 0 and "machines" not in entry and "priced on" not in entry["fitted_on"]
    slower = [replace(o, cpu_time_s=1.5 * o.cpu_time_s, wall_time_s=1.5 * o.wall_time_s) for o in _measured()[24:]]
    face = calibration.fit(_measured()[:24] + slower, TABLE, per_suite=False)
    assert entry["coefficients"] == pytest.approx(face.coefficients, rel=1e-9)
    assert f"  {EPYC_KEY}: 12 groups, no bridge: at face value" in capsys.readouterr().out


@pytest.mark.parametrize("drop, names", [("xeon-probe", "no group of the reference machine"),
                                         ("epyc-bridge", "ran on the reference machine")])
def test_a_bridge_folder_that_bridges_nothing_is_a_one_line_error(tmp_path, capsys, drop, names):
    folders = _two_machines()
    kept = [n for n in ("xeon-probe", "epyc-bridge") if n != drop]
    code, _ = _calibrate(tmp_path, folders, "xeon", "epyc", "--bridge", *kept)
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and err.count("\n") == 1
    assert err.startswith(f"zoo bench calibrate: error: --bridge {tmp_path / kept[0]}: ") and names in err
    assert "--bridge too" in err and "fit this one as a records folder" in err
    other_commit = [dict(r, commit="elsewhere") for r in folders["epyc-bridge"]]
    code, _ = _calibrate(tmp_path, {**folders, "epyc-bridge": other_commit}, "xeon", "epyc",
                         "--bridge", "epyc-bridge", "xeon-probe")
    assert code == EXIT_ERROR and "at elsewhe" in capsys.readouterr().err
