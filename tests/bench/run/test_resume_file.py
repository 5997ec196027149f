"""Mid-run resume state (zoo.trainer.resume; the file per group: zoo.bench.run.resume_file): a group
killed part-way resumes from its last checkpoint and ends with the numbers of an uninterrupted run,
bitwise (float64)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zoo.bench.store.records import read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import parse_suite
from zoo.trainer.resume import ResumePolicy, ResumeFile, parse_every

# Under `pytest -n 2 --dist loadgroup` this module runs in one worker: the uninterrupted reference run, trained once.
pytestmark = pytest.mark.xdist_group("checkpoint")

ROOT = Path(__file__).resolve().parents[3]

#: dropout (per-replica streams), Adam, a plateau scheduler, shuffled mini-batches: every piece of
#: state a resumed loop must get back; ``select = "last"`` reports the final state, which depends on all
SUITE = {
    "suite": {"name": "ckpt_test"},
    "defaults": {"dataset": "twin", "model": "gat", "num_layers": 2, "hidden_dim": 8, "dropout": 0.3, "epochs": 14,
                 "optimizer": "adam", "lr": 0.02, "dtype": "float64", "batch_size": 8, "select": "last",
                 "lr_scheduler": "plateau", "lr_scheduler_kwargs": {"factor": 0.5, "patience": 2}},
    "grid": {"seed": [0, 1, 2]},
    "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"},
}
NUMBERS = ("metrics", "train_loss", "val_loss", "epochs_to_best", "epochs_run", "stop_reason", "diverged",
           "last_step_lr", "num_parameters")


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The uninterrupted run, without checkpoints."""
    base = tmp_path_factory.mktemp("straight")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZOO_DATA", str(base / "data"))
        run_suite(parse_suite(SUITE), base / "out", RunOptions(device="cpu", quiet=True, resume_every="off"))
    assert not (base / "out" / "checkpoints").exists()
    return base / "out"


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def numbers(out: Path) -> dict:
    return {r["id"]: {k: r.get(k) for k in NUMBERS} for r in read_records(out) if r["status"] == "ok"}


def test_parse_every():
    assert parse_every(None) == ResumePolicy(600.0)
    assert parse_every("10m") == ResumePolicy(600.0)
    assert parse_every("2h").seconds == 7200 and parse_every("45").seconds == 45
    assert parse_every("5ep") == ResumePolicy(None, 5)
    assert not parse_every("off").enabled and not parse_every(0).enabled
    for bad in ("soon", "-3", "1.5ep", "0ep"):
        with pytest.raises(ValueError, match="--resume-every"):
            parse_every(bad)


def test_interrupted_group_resumes_bitwise(tmp_path, data_root, monkeypatch, straight):
    """In process: Ctrl-C right after the group's second checkpoint (the checkpoint stays); the
    re-run resumes at epoch 6 and matches an uninterrupted run bitwise."""
    suite = parse_suite(SUITE)
    out = tmp_path / "broken"
    real_save = ResumeFile.save

    def save_then_interrupt(self, state):
        real_save(self, state)
        if self.saves == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ResumeFile, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    assert len(list((out / "checkpoints").glob("*.pt"))) == 1
    monkeypatch.setattr(ResumeFile, "save", real_save)

    again = run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    assert again.ran == 3 and not again.failed
    ok = [r for r in read_records(out) if r["status"] == "ok"]
    assert {r["resumed_at_epoch"] for r in ok} == {6}
    assert numbers(out) == numbers(straight)  # bitwise: == on every float
    assert not (out / "checkpoints").exists()  # removed once the records are written


def test_group_that_raises_is_retried_replica_by_replica_without_checkpoints(tmp_path, data_root, monkeypatch,
                                                                             straight):
    """A stacked group that raises mid-run is run again one replica at a time, without checkpoints
    of its own (no per-replica files left behind); the records equal an uninterrupted run's."""
    suite = parse_suite(SUITE)
    out = tmp_path / "retried"
    real_save = ResumeFile.save

    def save_then_crash(self, state):
        real_save(self, state)
        if self.saves == 2:
            raise RuntimeError("crashed after the second checkpoint")

    monkeypatch.setattr(ResumeFile, "save", save_then_crash)
    first = run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    assert first.ran == 3 and not first.failed
    assert numbers(out) == numbers(straight)
    assert not (out / "checkpoints").exists() or not list((out / "checkpoints").glob("*.pt"))


def test_foreign_checkpoint_is_ignored(tmp_path):
    c = ResumeFile(tmp_path / "g.pt", ResumePolicy(None, 1), {"cells": ["a"]})
    c.save({"next_epoch": 3, "x": 1})
    assert ResumeFile(tmp_path / "g.pt", ResumePolicy(None, 1), {"cells": ["a"]}).load()["x"] == 1
    with pytest.warns(UserWarning, match="another configuration"):
        assert ResumeFile(tmp_path / "g.pt", ResumePolicy(None, 1), {"cells": ["b"]}).load() is None


def test_kill_9_mid_group_then_resume_is_bitwise(tmp_path, data_root, straight):
    """A real ``kill -9`` (SIGKILL, no clean-up) of the runner right after a checkpoint is written,
    in a subprocess; the re-run resumes and its records equal an uninterrupted run's."""
    suite = parse_suite(SUITE)
    out = tmp_path / "killed"
    script = textwrap.dedent(f"""
        import os, signal, json
        from zoo.trainer.resume import ResumeFile
        from zoo.bench.run.driver import run_suite
        from zoo.bench.run.options import RunOptions
        from zoo.bench.suite.load import parse_suite
        real = ResumeFile.save
        def save(self, state):
            real(self, state)
            if self.saves == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        ResumeFile.save = save
        run_suite(parse_suite(json.loads({json.dumps(json.dumps(SUITE))})), {str(out)!r},
                  RunOptions(device="cpu", quiet=True, resume_every="4ep"))
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not (out / "results.jsonl").exists() or not read_records(out)
    assert len(list((out / "checkpoints").glob("*.pt"))) == 1
    again = run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="4ep"))
    assert again.ran == 3
    assert {r["resumed_at_epoch"] for r in read_records(out)} == {8}
    assert numbers(out) == numbers(straight)
    assert not (out / "checkpoints").exists()


def crash_after_second_save(monkeypatch):
    real = ResumeFile.save

    def save(self, state):
        real(self, state)
        if self.saves == 2:
            raise RuntimeError("killed after the second checkpoint")

    monkeypatch.setattr(ResumeFile, "save", save)
    return real


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["process", "ray"])
def test_other_executors_resume_the_checkpoint(tmp_path, data_root, monkeypatch, straight, executor):
    """The checkpoint folder reaches the workers (absolute path in the job): a group interrupted
    here resumes in a worker process / a Ray task, with the uninterrupted numbers."""
    suite = parse_suite(SUITE)
    out = tmp_path / executor
    real = crash_after_second_save(monkeypatch)
    run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    monkeypatch.setattr(ResumeFile, "save", real)
    assert len(list((out / "checkpoints").glob("*.pt"))) == 1
    if executor == "ray":
        ray = pytest.importorskip("ray")
        ray.init(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        again = run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep", executor=executor))
    finally:
        if executor == "ray":
            ray.shutdown()
    assert again.ran == 3 and not again.failed
    assert {r["resumed_at_epoch"] for r in read_records(out) if r["status"] == "ok"} == {6}
    assert numbers(out) == numbers(straight)
    assert not (out / "checkpoints").exists()


def _interrupt_after_second_save(monkeypatch, keep_cpu: bool):
    real_save = ResumeFile.save

    def save_then_interrupt(self, state):
        real_save(self, state if keep_cpu else {k: v for k, v in state.items() if k != "cpu_s"})
        if self.saves == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ResumeFile, "save", save_then_interrupt)
    return real_save


@pytest.mark.parametrize("keep_cpu", [True, False], ids=["cpu-time-saved", "state-without-cpu-time"])
def test_a_resumed_group_counts_the_cpu_time_of_its_earlier_sittings(tmp_path, data_root, monkeypatch, keep_cpu):
    """The resume state holds the CPU time used so far, and the resumed group's ``group_cpu_time_s``
    includes it; a state saved without it (before records carried CPU time) leaves the record without
    one rather than with the last sitting's alone."""
    suite, out = parse_suite(SUITE), tmp_path / "broken"
    real_save = _interrupt_after_second_save(monkeypatch, keep_cpu)
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    monkeypatch.setattr(ResumeFile, "save", real_save)
    run_suite(suite, out, RunOptions(device="cpu", quiet=True, resume_every="3ep"))
    ok = [r for r in read_records(out) if r["status"] == "ok"]
    assert len(ok) == 3 and {r["resumed_at_epoch"] for r in ok} == {6}
    assert all(r["group_wall_time_s"] > r["resumed_elapsed_s"] for r in ok)
    if keep_cpu:
        assert all(0 < r["resumed_cpu_s"] < r["group_cpu_time_s"] for r in ok)
    else:
        assert not any("group_cpu_time_s" in r or "resumed_cpu_s" in r for r in ok)
