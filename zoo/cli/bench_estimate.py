"""``zoo bench SUITE --estimate``: what a run with these options would cost, per slice, run nothing."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Dict, List


def _jobs(cells: List[Any], done: set, options: Any) -> Dict[str, List[Any]]:
    """The pending cells as the runner would split them into jobs (a group, or parts of one)."""
    groups: Dict[str, List[Any]] = {}
    for c in cells:
        if c.id not in done:
            groups.setdefault(c.group, []).append(c)
    split: Dict[str, List[Any]] = {}
    for gid, group in groups.items():
        step = (options.max_replicas or len(group)) if options.stacked else 1
        for i in range(0, len(group), step):
            split[f"{gid}:{i}"] = group[i:i + step]
    return split


def _parallelism(options: Any, jobs: int) -> tuple:
    """``(workers, executor name)`` as the run would use them."""
    if options.ray:
        return max(1, int((os.cpu_count() or 1) // max(options.executor.cpus_per_group, 1e-9))), "ray (this machine)"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = max(1, min(cores, jobs or 1)) if options.workers == "auto" else int(options.workers)
    return workers, "local" if workers == 1 else "process"


def estimate_run(suite: Any, out: Path, args: argparse.Namespace, options: Any) -> int:
    """Print the estimate of running ``suite`` into ``out`` (records already there count as done) with
    ``options`` (:class:`~zoo.bench.run.options.RunOptions`; ``args``: how the command was spelled)."""
    from zoo.bench.plan import cost, cost_file
    from zoo.bench.plan.estimate import DEFAULT_BY, estimate, format_estimate
    from zoo.bench.plan.shards import select
    from zoo.bench.store import records
    from zoo.bench.suite.cells import cell_value

    cells = select(suite, options.where, options.shard)
    finished = records.read_records(out) if (out / records.RESULTS_FILE).exists() else []
    done = {r["id"] for r in finished if r.get("status", "ok") == "ok"}
    split = _jobs(cells, done, options)
    workers, executor = _parallelism(options, len(split))
    device = options.device or "cpu"
    by = [k.strip() for k in args.estimate_by.split(",")] if args.estimate_by else list(DEFAULT_BY)
    est = estimate(suite.name, suite.mode, split, cost_file.load_cost_model(device), cost.load_dataset_table(),
                   cell_value, by=by, finished=finished, done=[c.id for c in cells if c.id in done],
                   workers=workers, executor=executor, device=device, report=not args.no_leaderboard)
    command = f"zoo bench {args.suite}" + "".join(f" --set {k}={v}" for k, v in args.set) + \
        "".join(f" --where {w}" for w in args.where)
    print(format_estimate(est, command))
    return 0
