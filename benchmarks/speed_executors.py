"""Wall time of one suite with each executor: local, --workers N, Ray (N CPUs), and Ray's per-task overhead.

    python benchmarks/speed_executors.py                       # quick suite (--quick form)
    python benchmarks/speed_executors.py --suite balance_table2 --where dataset=cornell_npz --where num_layers=2,5
    python benchmarks/speed_executors.py --workers 2 --skip-ray

Every executor runs the same cells into its own temporary folder in this one process run, so
the ratios compare like with like (also on a loaded machine: the load is shared, not removed).
The records are checked to be the same runs (ids) with the same metrics.  Ray's cost is given
in parts: starting the local instance (once per `zoo bench`), the round trip of a no-op task
(submit -> schedule -> run -> result), and the first task of a fresh worker process (it imports
torch / PyG / zoo and loads the dataset; later tasks of that worker reuse both).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from zoo.bench.store.records import read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.plan.shards import select
from zoo.bench.suite.selection import parse_where
from zoo.bench.suite.load import load_suite


def _noop(x: int = 0) -> int:
    return x


def _timed_run(label: str, suite, out: Path, **kwargs) -> float:
    t0 = time.perf_counter()
    summary = run_suite(suite, out, RunOptions(device="cpu", quiet=True, **kwargs))
    wall = time.perf_counter() - t0
    if summary.failed:
        raise SystemExit(f"{label}: {len(summary.failed)} run(s) failed: {next(iter(summary.failed.values()))}")
    print(f"{label:<28} {wall:8.1f} s   ({summary.ran} runs, {summary.executor})", flush=True)
    return wall


def _same(a: Path, b: Path) -> bool:
    ra = {r["id"]: r["metrics"] for r in read_records(a)}
    rb = {r["id"]: r["metrics"] for r in read_records(b)}
    return ra == rb


def ray_overheads(num_cpus: int, n: int = 100) -> dict:
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t0
    f = ray.remote(_noop).options(num_cpus=1)
    t0 = time.perf_counter()
    ray.get(f.remote())  # first task: starts a worker process
    first = time.perf_counter() - t0
    ray.get([f.remote() for _ in range(num_cpus)])  # warm every worker
    t0 = time.perf_counter()
    for i in range(n):
        ray.get(f.remote(i))
    round_trip = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    ray.get([f.remote(i) for i in range(n)])
    pipelined = (time.perf_counter() - t0) / n
    return {"start": start, "first": first, "round_trip": round_trip, "pipelined": pipelined}


def process_overheads(workers: int, n: int = 100) -> dict:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(_noop).result()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(n):
            pool.submit(_noop, i).result()
        round_trip = (time.perf_counter() - t0) / n
    return {"first": first, "round_trip": round_trip}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="quick")
    p.add_argument("--full", action="store_true", help="the suite's full form (default: its --quick form)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--skip-ray", action="store_true")
    args = p.parse_args(argv)

    suite = load_suite(args.suite, quick=not args.full)
    where = parse_where(args.where)
    cells = select(suite, where)
    print(f"suite {suite.name}{'' if args.full else ' --quick'} {' '.join('--where ' + w for w in args.where)}: "
          f"{len(cells)} runs in {len({c.group for c in cells})} groups; {os.cpu_count()} CPU cores, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min)", flush=True)
    import torch

    print(f"torch threads in this process: {torch.get_num_threads()}", flush=True)
    from zoo.trainer.cells import TaskCache

    cache = TaskCache()  # process / stage every dataset once, untimed (first loads write the data root)
    for c in cells:
        cache.get(c.config["task"])
    del cache
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        t_local = _timed_run(f"local ({torch.get_num_threads()} torch threads)", suite, tmp_path / "local",
                             where=where)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # what each worker gets: separates process parallelism from thread effects
        t_local1 = _timed_run("local (1 torch thread)", suite, tmp_path / "local1", where=where)
        torch.set_num_threads(threads)
        t_proc = _timed_run(f"--workers {args.workers}", suite, tmp_path / "proc", where=where, workers=args.workers)
        print(f"  same runs and metrics as local: {_same(tmp_path / 'proc', tmp_path / 'local')}")
        po = process_overheads(args.workers)
        print(f"  process pool: first no-op task {po['first']:.2f} s (spawn + import), "
              f"then {po['round_trip'] * 1e3:.2f} ms per no-op round trip", flush=True)
        if not args.skip_ray:
            import ray

            ov = ray_overheads(args.workers)
            t_ray = _timed_run(f"ray ({args.workers} CPUs, started)", suite, tmp_path / "ray", where=where,
                               executor="ray")
            ray.shutdown()
            print(f"  same runs and metrics as local: {_same(tmp_path / 'ray', tmp_path / 'local')}")
            print(f"  ray: start of the local instance {ov['start']:.1f} s; first no-op task {ov['first']:.2f} s "
                  f"(worker process start); no-op round trip {ov['round_trip'] * 1e3:.2f} ms sequential, "
                  f"{ov['pipelined'] * 1e3:.2f} ms per task when {100} are in flight", flush=True)
        print("\nratios (local / executor; > 1 = faster than local):")
        print(f"  local with 1 torch thread: {t_local / t_local1:.2f}x")
        print(f"  --workers {args.workers}: {t_local / t_proc:.2f}x  (vs local with 1 thread: {t_local1 / t_proc:.2f}x)")
        if not args.skip_ray:
            print(f"  ray, instance already up: {t_local / t_ray:.2f}x;  "
                  f"including its start: {t_local / (t_ray + ov['start']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
