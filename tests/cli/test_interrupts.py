"""The zoo command as a new user meets it: Ctrl-C, $ZOO_DATA, --version,
--device — one line each, the right exit code."""
from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import zoo
from zoo.cli import main
from tests.conftest import REPO, tiny_twin_suite


def _driver():
    """The module whose execute_group the bench driver calls."""
    return importlib.import_module("zoo.bench.run.driver")


def _train_argv(out, *extra):
    return ["train", "--model", "gat", "--dataset", "twin", "--num-layers", "1", "--epochs", "2", "--seeds", "0-1",
            "--sequential", "--quiet", "--out", str(out), *extra]


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"zoo {zoo.__version__}"


def test_unknown_device_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(_train_argv(tmp_path / "o", "--device", "gpu"))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unknown device 'gpu'; use cpu, cuda or cuda:N" in err
    assert "xpu" not in err  # not torch's list of twenty device types
    assert err.strip().splitlines()[-1].startswith("zoo train: error: argument --device: unknown device 'gpu'")


def test_unwritable_zoo_data_is_checked_up_front(tmp_path, monkeypatch, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("ZOO_DATA", str(afile))
    out = tmp_path / "o"
    assert main(_train_argv(out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "$ZOO_DATA" in err and "is a file" in err
    assert not (out / "results.jsonl").exists()  # no run was recorded as failed


def test_ctrl_c_is_one_line_exit_130_and_resumable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    driver = _driver()
    real, calls = driver.execute_group, []

    def interrupted_second(job, *args, **kwargs):
        calls.append(job)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(job, *args, **kwargs)

    monkeypatch.setattr(driver, "execute_group", interrupted_second)
    monkeypatch.setattr(driver, "auto_workers", lambda *a, **k: 1)  # both groups in this process
    out = tmp_path / "o"
    assert main(_train_argv(out)) == 130
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [f"zoo train: interrupted: 1 run(s) recorded in {out}; run the same command to resume"]
    monkeypatch.setattr(driver, "execute_group", real)
    assert main(_train_argv(out)) == 0
    assert "1 run(s) done now, 1 already done" in capsys.readouterr().out


@pytest.mark.slow
def test_ctrl_c_with_the_process_executor(tmp_path):
    """A real SIGINT to the process group while two worker processes train: the workers ignore it,
    the driver prints one line and exits 130, and nothing is left running."""
    raw = tiny_twin_suite("interrupt")
    raw["defaults"].update({"epochs": 400, "num_layers": 4})
    raw["grid"]["seed"] = list(range(8))
    suite = tmp_path / "interrupt.toml"
    suite.write_text(_toml(raw))
    out = tmp_path / "o"
    env = {**os.environ, "ZOO_DATA": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "zoo", "bench", str(suite), "--executor", "process", "--workers",
                             "2", "--quiet", "--out", str(out), "--no-leaderboard"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "results.jsonl").exists():
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("zoo bench: interrupted: ")


def _toml(raw):
    lines = []
    for table, values in raw.items():
        lines.append(f"[{table}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"
