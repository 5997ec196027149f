"""Executors: --workers N and Ray give the local executor's records; failures, dead workers, killed drivers.

One local Ray cluster (127.0.0.1, 1 CPU: one worker process, which imports torch and the zoo once) is
started per module and shut down after; the runner uses it as the already-initialised session, and a
second driver process joins it by address.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from zoo.bench.run.executors import ProcessExecutor, RayExecutor, make_executor
from zoo.bench.store.records import read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo._toml import tomllib
from zoo.bench.suite.load import find_suite, parse_suite

from tests.bench.suite.test_selection import TINY, by_id, same_numbers

# Under `pytest -n 2 --dist loadgroup` this module runs in one worker: one local Ray cluster, started once.
pytestmark = pytest.mark.xdist_group("ray_cluster")


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    monkeypatch.setenv("ZOO_DATA", str(root))
    return root


def quick_float64_suite():
    """The quick suite's --quick form at float64 (exact comparisons across executors)."""
    path = find_suite("quick")
    raw = tomllib.loads(path.read_text())
    raw["defaults"]["dtype"] = "float64"
    return parse_suite(raw, quick=True, source=str(path))


def tiny(**defaults):
    raw = json.loads(json.dumps(TINY))
    raw["defaults"].update(defaults)
    return raw


# --------------------------------------------------------------------------- --workers N


def test_make_executor_choices():
    assert make_executor("local", workers=2).name == "process"
    assert isinstance(make_executor("process", workers=3), ProcessExecutor)
    with pytest.raises(ValueError, match="unknown executor 'rey'. Did you mean 'ray'"):
        RunOptions(executor="rey")
    with pytest.raises(ValueError, match="workers must be a number >= 1 or 'auto', got 0"):
        RunOptions(workers=0)
    with pytest.raises(ValueError, match="workers is for the process executor"):
        RunOptions(executor="ray", workers=2)


def test_workers_2_equals_local(tmp_path, data_root):
    suite = parse_suite(tiny())
    run_suite(suite, tmp_path / "local", RunOptions(device="cpu", quiet=True))
    summary = run_suite(suite, tmp_path / "proc", RunOptions(device="cpu", quiet=True, workers=2))
    assert summary.executor == "process (2 workers)" and summary.ran == 12 and not summary.failed
    same_numbers(by_id(tmp_path / "proc"), by_id(tmp_path / "local"))
    assert all(r["group_cpu_time_s"] > 0 for r in by_id(tmp_path / "proc").values())  # a worker's own CPU time


def _die_on_job_0(job):
    from zoo.bench.run.executors import Outcome

    if job.index == 0:
        os._exit(1)  # a worker process that dies (OOM killer, kill -9)
    return Outcome(job, "ok")


@pytest.mark.slow
def test_dead_worker_process_fails_its_group_and_the_pool_goes_on():
    from zoo.bench.run.executors import GroupJob

    jobs = [GroupJob(i, [], "train", "cpu", True) for i in range(5)]
    outcomes = list(ProcessExecutor(2).run(jobs, _die_on_job_0))
    status = {o.job.index: o.status for o in outcomes}
    assert sorted(status) == [0, 1, 2, 3, 4]  # every job comes back exactly once
    assert status[0] == "failed" and "worker process died" in outcomes[[o.job.index for o in outcomes].index(0)].error
    assert status[2] == status[3] == status[4] == "ok"  # only what was in flight with job 0 can fail


# --------------------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # pragma: no cover - another module left one running
        ray.shutdown()
    ray.init(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_ray_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(RuntimeError, match=r"pip install gat-zoo\[ray\]"):
        list(RayExecutor().run([object()], lambda job: job))  # type: ignore[list-item]


@pytest.mark.slow  # ray's records equal local's on the default run too: test_ray_task_that_raises_...
def test_ray_equals_local_on_the_quick_suite(tmp_path, data_root, ray_cluster):
    suite = quick_float64_suite()
    where = {"dataset": ["twin"], "model": ["gat", "gatdb"]}  # two groups (one init each on twin)
    run_suite(suite, tmp_path / "local", RunOptions(device="cpu", quiet=True, where=where))
    summary = run_suite(suite, tmp_path / "ray", RunOptions(device="cpu", quiet=True, where=where, executor="ray"))
    assert summary.executor.startswith("ray") and summary.ran == 2 and not summary.failed
    local, remote = by_id(tmp_path / "local"), by_id(tmp_path / "ray")
    same_numbers(remote, local)
    assert all(r["config"]["run"]["dtype"] == "float64" for r in remote.values())
    assert all(r["group_cpu_time_s"] > 0 for r in remote.values())  # the Ray worker's own CPU time


def test_ray_task_that_raises_is_recorded_and_the_rest_completes(tmp_path, data_root, ray_cluster):
    """One group fails on its Ray worker; the other two complete with the local executor's numbers."""
    raw = tiny()
    raw["grid"] = {"model": ["gat"], "k": [1, 3, 4], "init": ["xavier"]}  # twin k=1 raises on the worker
    summary = run_suite(parse_suite(raw), tmp_path / "r", RunOptions(device="cpu", quiet=True, executor="ray"))
    assert summary.executor.startswith("ray") and summary.ran == 2 and len(summary.failed) == 1
    recs = read_records(tmp_path / "r")
    failed = [r for r in recs if r.get("status") == "failed"]
    assert len(failed) == 1 and "k must be an int >= 2" in failed[0]["error"] and failed[0]["executor"] == "ray"
    assert sorted(r["config"]["task"]["options"]["k"] for r in recs if r["status"] == "ok") == [3, 4]
    run_suite(parse_suite(raw), tmp_path / "local", RunOptions(device="cpu", quiet=True, where={"k": [3, 4]}))
    remote = {i: r for i, r in by_id(tmp_path / "r").items() if r.get("status", "ok") == "ok"}
    same_numbers(remote, by_id(tmp_path / "local"))


def _ray_task_pids() -> list:
    """Ray worker processes executing our task (Ray titles them ``ray::_ray_task``)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().startswith(b"ray::_ray_task"):
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def _kill_one_ray_task_worker(killed: list) -> threading.Thread:
    def killer():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            pids = _ray_task_pids()
            if pids:
                time.sleep(0.5)  # mid-task: the group is loading / training
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.05)

    thread = threading.Thread(target=killer)
    thread.start()
    return thread


@pytest.mark.slow
def test_killed_ray_worker_is_retried_and_the_result_is_complete(tmp_path, data_root, ray_cluster):
    raw = tiny(epochs=400)
    raw["grid"] = {"model": ["gat"], "k": [3], "init": ["xavier", "bal_o"]}
    killed: list = []
    thread = _kill_one_ray_task_worker(killed)
    summary = run_suite(parse_suite(raw), tmp_path / "k", RunOptions(device="cpu", quiet=True,
                        executor=RayExecutor(max_retries=2)))
    thread.join()
    assert killed, "no Ray worker was running the group"
    assert summary.ran == 2 and not summary.failed
    assert [r["status"] for r in read_records(tmp_path / "k")] == ["ok", "ok"]
    # Without retries the dead worker's group is recorded as failed, and a re-run completes it.
    killed.clear()
    thread = _kill_one_ray_task_worker(killed)
    summary = run_suite(parse_suite(raw), tmp_path / "k0", RunOptions(device="cpu", quiet=True,
                        executor=RayExecutor(max_retries=0)))
    thread.join()
    assert killed and summary.ran == 0 and len(summary.failed) == 2
    recs = read_records(tmp_path / "k0")
    assert [r["status"] for r in recs] == ["failed", "failed"] and "WorkerCrashedError" in recs[0]["error"]
    assert run_suite(parse_suite(raw), tmp_path / "k0", RunOptions(device="cpu", quiet=True, executor="ray")).ran == 2


DRIVER = textwrap.dedent("""
    import json, sys
    from zoo.bench.run.executors import RayExecutor
    from zoo.bench.run.driver import run_suite
    from zoo.bench.run.options import RunOptions
    from zoo.bench.suite.load import parse_suite
    run_suite(parse_suite(json.loads(sys.argv[1])), sys.argv[2],
              RunOptions(device="cpu", quiet=True, executor=RayExecutor(address=sys.argv[3])))
""")


@pytest.mark.slow
def test_killed_ray_driver_resumes_without_duplicates(tmp_path, data_root, ray_cluster):
    raw = tiny(epochs=60)
    out = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(raw), str(out), ray_cluster],
                            env={**os.environ, "ZOO_DATA": str(data_root)})
    results = out / "results.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        if results.exists() and len(results.read_bytes().splitlines()) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_records(out)
    assert 2 <= len(before) < 12, "the kill should land mid-suite"
    summary = run_suite(parse_suite(raw), out, RunOptions(device="cpu", quiet=True, executor="ray"))
    after = read_records(out)
    assert summary.already_done == len(before) and summary.ran == 12 - len(before)
    assert len(after) == 12 and len({r["id"] for r in after}) == 12
    assert [r["id"] for r in after[:len(before)]] == [r["id"] for r in before]


def test_local_executor_sets_and_restores_torch_threads():
    """`zoo bench` runs in-process groups with 1 torch thread on the CPU (--threads to change):
    2 threads on small graphs measured up to 17x slower when another process shares the cores."""
    import torch

    from zoo.bench.run.executors import GroupJob, LocalExecutor
    from zoo.bench.suite.load import load_suite

    seen = []
    torch.set_num_threads(2)  # what torch picks on a 2-core machine (the tests run with 1)
    before = torch.get_num_threads()
    cell = load_suite("quick", quick=True).cells[0]
    job = GroupJob(index=0, cells=[cell], mode="energy_at_init", device="cpu", stacked=True)
    ex = LocalExecutor(threads=1)
    list(ex.run([job], lambda job, callbacks=(): seen.append(torch.get_num_threads())))
    assert seen == [1]
    assert torch.get_num_threads() == before
    torch.set_num_threads(1)
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        RunOptions(threads=0)


def test_cli_workers_default_is_auto_unless_threads_or_ray():
    """`zoo bench` without --workers: one process per core (auto); --threads N means the in-process
    loop, Ray sets its own parallelism; an explicit --workers wins."""
    from zoo.cli import build_parser
    from zoo.cli.bench import default_workers

    def resolved(*argv):
        return default_workers(build_parser().parse_args(["bench", "quick", *argv]))

    assert resolved() == "auto"
    assert resolved("--threads", "2") == 1
    assert resolved("--executor", "ray") == 1
    assert resolved("--workers", "1") == 1 and resolved("--workers", "3", "--threads", "2") == 3
