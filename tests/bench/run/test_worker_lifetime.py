"""Workers die with their driver: ``kill -9`` / ``SIGTERM`` of ``zoo bench --workers 2`` leaves no worker
and no resource tracker behind; SIGTERM prints Ctrl-C's one line.  A script that would start workers
from its top level without a main guard, or from stdin, is refused in one line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, tiny_twin_suite

LINUX = sys.platform.startswith("linux")


def _ppid(pid):
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited (its new parent may not have reaped it yet)


def _descendants(root):
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p in pids if _ppid(p) in frontier} - found
        found |= frontier
    return found


def _ignores_sigint(pid):
    """The worker ran its initializer (which ignores SIGINT: Ctrl-C is the driver's to handle)."""
    try:
        line = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines() if l.startswith("SigIgn:"))
    except (OSError, StopIteration):
        return False
    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def _suite(tmp_path):
    raw = tiny_twin_suite("lifetime")
    raw["defaults"].update({"epochs": 20000, "patience": 20000})
    raw["grid"]["num_layers"] = [1, 2, 3]  # three groups: two in flight, one queued
    path = tmp_path / "lifetime.toml"
    path.write_text("\n".join(f"[{t}]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in vals.items())
                              for t, vals in raw.items()) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads the process table in /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_no_worker_outlives_its_driver(tmp_path, sig):
    env = {**os.environ, "ZOO_DATA": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    out = tmp_path / "o"
    driver = subprocess.Popen([sys.executable, "-m", "zoo", "bench", str(_suite(tmp_path)), "--workers", "2",
                               "--quiet", "--no-leaderboard", "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True)
    others = set()
    try:
        deadline = time.time() + 240
        workers = set()
        while time.time() < deadline and driver.poll() is None:
            workers = {p for p in _descendants(driver.pid) if _ignores_sigint(p)}
            if len(workers) >= 2:
                break
            time.sleep(0.5)
        assert len(workers) >= 2, "the two workers did not start"
        others = _descendants(driver.pid)  # the workers and the resource tracker
        os.kill(driver.pid, sig)
        _, err = driver.communicate(timeout=60)  # an orphan holding the pipes open times this out
        deadline = time.time() + 10
        while time.time() < deadline and any(_alive(p) for p in others):
            time.sleep(0.2)
        assert not [p for p in others if _alive(p)], "processes outlived their driver"
        if sig == signal.SIGTERM:
            assert driver.returncode == 143, err
            assert err.strip().splitlines() == [f"zoo bench: interrupted: 0 run(s) recorded in {out}; run the same "
                                                "command to resume"]
    finally:
        try:  # the driver's session: it and whatever it started that is still there
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in _descendants(driver.pid) | {p for p in others if _alive(p)}:  # no orphan left by a failure
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


SCRIPT = """
import sys
from tests.conftest import tiny_twin_suite
from zoo.bench.suite.load import parse_suite
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
{call}
"""
CALL = "run_suite(parse_suite(tiny_twin_suite('guard')), sys.argv[1], RunOptions(workers=2, quiet=True))"


def _script(tmp_path, call):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT.format(call=call))
    return path


def _run(tmp_path, script, stdin=None):
    env = {**os.environ, "ZOO_DATA": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    args = [sys.executable, *(["-"] if stdin else [str(script)]), str(tmp_path / "o")]
    return subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


@pytest.mark.slow  # a Python process importing torch
def test_a_script_without_a_main_guard_is_told_so(tmp_path):
    done = _run(tmp_path, _script(tmp_path, CALL))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "RuntimeError: the process executor (2 workers) starts worker processes, which import your script "
        "again: put the call under `if __name__ == \"__main__\":`, or use workers=1")
    assert not (tmp_path / "o" / "results.jsonl").exists()  # no run recorded as "worker died"


@pytest.mark.slow
def test_a_script_from_stdin_is_told_so(tmp_path):
    done = _run(tmp_path, None, stdin=SCRIPT.format(call=CALL))
    assert done.returncode == 1
    assert "it was read from <stdin> (no file to import): save it as a .py file" in done.stderr.strip().splitlines()[-1]


def test_the_main_guard_is_recognised():
    from zoo.bench.run.lifetime import _guarded_lines
    import ast

    tree = ast.parse("import x\nif __name__ == '__main__':\n    run()\n    more()\nrun()\n")
    assert _guarded_lines(tree) == [(2, 4)]
    assert _guarded_lines(ast.parse("if '__main__' == __name__:\n    run()\n")) == [(1, 2)]
