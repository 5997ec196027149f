"""Run a suite: expand, skip finished runs, train each group as stacked replicas, log records.

The driver (:func:`run_suite`) selects cells (``where`` / ``shard``), drops those already
logged, makes one job per group and hands the jobs to an executor (:mod:`zoo.bench.run.executors`:
in-process, a process pool, or Ray).  Wherever a job runs, :func:`execute_group` does the work
and returns ``(cell, result, extra)`` per cell; only the driver appends records.

The runner owns its output folder::

    OUT/results.jsonl        one line per finished run (zoo.bench.store.records)
    OUT/suite.resolved.json  the expanded suite, with its ``--set`` values if any (atomic; another/edited suite or
                             another --set is refused: records.check_same_suite)
    OUT/suite.lock           held (flock) while a runner works in OUT
    OUT/skipped.json         cells not run, with the reason (e.g. dataset files absent)
    OUT/checkpoints/         a long group's training state while it runs (zoo.bench.run.resume_file, zoo.trainer.resume)
    OUT/leaderboard/         written by zoo.bench.publish

Killing the process at any moment loses only the runs in flight: a record is appended only
when its run has finished, in one atomic write, and a re-run skips every id already logged.
A group that trains longer than ``resume_every`` (default 10 minutes) saves its state now
and then, so a re-run resumes it from its last saved state with the same numbers.
A group that raised (or whose worker died) is logged as ``status: "failed"`` with its error;
the leaderboard ignores such records and a re-run retries them.  A group whose CUDA graphs failed
(a capture or replay that raised, a self-check difference: :class:`zoo.trainer.graphs.GraphFallback`)
is run again eagerly from its start in a fresh worker process (:data:`~zoo.bench.run.executors.REDO`),
its resume file dropped; every record says how its epochs ran (``cuda_graphs``: ``replayed``,
``eager``, ``eager (why)`` or ``fell back (why)``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import functools
import json
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from tqdm.auto import tqdm

from zoo._gc import end_startup
from zoo._io import user_path, write_atomic
from zoo.bench.run.resume_file import RESUME_DIR, resume_key, fingerprint, remove_resume_file
from zoo.bench.run.executors import (REDO, Executor, GroupJob, LocalExecutor, Outcome, auto_workers, format_error,
                                     make_executor)
from zoo.bench.run.modes import get_mode
from zoo.bench.run.options import RunOptions
from zoo.bench.run.provenance import provenance
from zoo.bench.run.weights import weights_payload
from zoo.bench.plan.shards import group_cost, select, selection_info
from zoo.bench.suite.schema import Cell, Suite
from zoo.bench.store import records
from zoo.bench.store.weights import write_weights
from zoo.datasets import MissingDataError
from zoo.trainer.cells import TaskCache, build_config, resolve_device, start_group
from zoo.trainer.graphs import GraphFallback
from zoo.trainer.results import RunResult
from zoo.trainer.resume import ResumeFile
from zoo._user_modules import import_from_env, worker_env

PathLike = Union[str, Path]


@dataclass
class RunSummary:
    out: Path
    total: int
    already_done: int
    ran: int
    skipped: Dict[str, str] = field(default_factory=dict)   # cell id -> reason
    diverged: int = 0
    wall_time_s: float = 0.0
    failed: Dict[str, str] = field(default_factory=dict)    # cell id -> error
    executor: str = "local"


@contextlib.contextmanager
def _lock(out: Path) -> Iterator[None]:
    fh = open(out / "suite.lock", "w")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another runner is working in {out} (suite.lock is held); "
                               "wait for it or choose another --out") from None
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()


# --------------------------------------------------------------------------- measurements


def _peak_memory(device: torch.device) -> Tuple[int, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_max_rss"


def _group_cpu_time(run: Any, extra: Dict[str, Any], device: torch.device) -> Optional[float]:
    """The CPU time the group's process used over the span of ``group_wall_time_s`` (its own CPU time
    under any executor: the driver's process in-process, a worker's, a Ray worker's, each running one
    group at a time), with a resumed group's earlier sittings; ``None`` on a GPU (the device's time is
    the cost there, not the host's) and for a group resumed from a state saved without it."""
    if device.type != "cpu" or ("resumed_at_epoch" in extra and "resumed_cpu_s" not in extra):
        return None
    return time.process_time() - run.cpu_started + float(extra.get("resumed_cpu_s", 0.0))


# --------------------------------------------------------------------------- running


def run_group(mode: str, cells: Sequence[Cell], task: Any, device: torch.device, stacked: bool,
              callbacks: Sequence[Any] = (), save_weights: str = "none", resume: Optional[ResumeFile] = None,
              cuda_graphs: str = "auto") -> List[Tuple[RunResult, Dict[str, Any]]]:
    """Train (or measure) one group of cells together; returns (result, extra record fields) per cell.

    The replicas are built as ``zoo.fit`` builds them (:func:`zoo.trainer.cells.start_group`), then
    the suite's ``mode`` (``train``, ``energy_at_init``, ``prune_layers``...) produces the results;
    ``callbacks`` (a progress bar) go to the training loop; ``save_weights`` (``best`` / ``last``)
    adds each replica's model file bytes as ``extra["weights_data"]``; ``resume`` saves / resumes
    the training loop's state (:mod:`zoo.trainer.resume`); ``cuda_graphs``: ``TrainConfig.cuda_graphs``
    (no cell key: it changes no number).
    """
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    suite_mode = get_mode(mode)
    run = start_group([c.config for c in cells], task, device, stacked=stacked, trains=suite_mode.spec.trains,
                      cuda_graphs=cuda_graphs, keep_best_state=save_weights == "best")  # copies of the selected states
    results = suite_mode.produce(run, cells, callbacks, resume)
    mem, mem_kind = _peak_memory(device)
    # a resumed group: the training time of the sittings before this one counts too
    group_time = time.perf_counter() - run.started + float(results[0].extra.get("resumed_elapsed_s", 0.0))
    cpu = _group_cpu_time(run, results[0].extra, device)
    payload = weights_payload(save_weights, run.replicas, cells, results)
    out = []
    for cell, res, data in zip(cells, results, payload):
        extra = {"peak_memory_bytes": mem, "peak_memory_kind": mem_kind, "group_wall_time_s": group_time,
                 **({"group_cpu_time_s": cpu} if cpu is not None else {}), "group_size": len(cells)}
        if data is not None:
            extra["weights_data"] = data  # written beside the record by the driver (_log_outcome)
        out.append((res, extra))
    return out


# --------------------------------------------------------------------------- one group, anywhere


_WORKER_TASKS: Dict[str, TaskCache] = {}


def _worker_tasks(data_root: Optional[str]) -> TaskCache:
    """A worker process's task cache (kept across the groups it runs; two tasks at most)."""
    key = json.dumps([data_root, os.environ.get("ZOO_DATA"), os.environ.get("ZOO_DATA_MIRROR")])
    if key not in _WORKER_TASKS:
        _WORKER_TASKS.clear()
        _WORKER_TASKS[key] = TaskCache(data_root, max_items=2)
    return _WORKER_TASKS[key]


def execute_group(job: GroupJob, callbacks: Sequence[Any] = (), tasks: Optional[TaskCache] = None) -> Outcome:
    """The work every executor runs for one job, here or on a worker: load the task (from the
    data root / mirror *of this machine*), train the group, and return ``(cell, result, extra)``
    per cell — ``extra`` holds everything of the record that only the worker knows (task
    facts, build config, device, peak memory).  ``callbacks``: the training loop's (the local
    executor's progress bar).  Missing data -> ``skipped``; failed CUDA graphs ->
    :data:`~zoo.bench.run.executors.REDO` (the group eagerly, in a fresh process); any other error ->
    ``failed`` with its traceback; nothing is written here.
    """
    resume = None
    try:
        if tasks is None:  # a worker: the driver's ZOO_DATA / ZOO_DATA_MIRROR (absolute paths)
            os.environ.update(job.env)
            import_from_env()  # the user's modules: their registrations, before any task is loaded
            tasks = _worker_tasks(job.data_root)
        cells = job.cells
        try:
            task = tasks.get(cells[0].config["task"])
        except MissingDataError as e:
            return Outcome(job, "skipped", error=f"dataset {cells[0].dataset!r} unavailable: {e}")
        _check_fingerprint(cells[0].config["task"], task)
        dev = resolve_device(job.device)
        if job.resume_dir is not None and job.resume_every is not None and job.resume_every.enabled:
            resume = ResumeFile(Path(job.resume_dir) / f"{resume_key(cells, job.stacked)}.pt",
                                      job.resume_every, fingerprint(cells, job.stacked))
        results = run_group(job.mode, cells, task, dev, job.stacked, callbacks=callbacks,
                            save_weights=job.save_weights, resume=resume, cuda_graphs=job.cuda_graphs)
        prov = provenance(dev)
        common = {"split": task.split, "preprocessing": list(task.preprocessing), "task_source": task.source,
                  "metric": task.metric, "device": prov["device"], "versions": prov["versions"],
                  "commit": prov["commit"], "host": prov["host"], "float_order": prov["float_order"],
                  **({"cuda_graphs": f"fell back ({job.graphs_fallback})"} if job.graphs_fallback else {})}
        out = []
        for cell, (res, extra) in zip(cells, results):
            res.best_state = None  # tensors the driver does not need (and would have to receive)
            out.append((cell, res, {**common, "build_config": build_config(cell.config, task), **extra}))
        return Outcome(job, "ok", out)
    except GraphFallback as e:
        if resume is not None:  # the re-run starts from the group's start
            resume.remove()
        return eager_redo(job, e.reason)
    except Exception as e:  # recorded as failed; the suite goes on and a re-run retries it
        if len(job.cells) > 1:
            return _replica_by_replica(job, callbacks, tasks)
        return Outcome(job, "failed", error=format_error(e))


def eager_redo(job: GroupJob, reason: str) -> Outcome:
    """``job`` to be run again eagerly (``cuda_graphs = "off"``) in a fresh process, its records
    saying ``fell back (reason)``."""
    return Outcome(job, REDO, error=reason, redo=dataclasses.replace(job, cuda_graphs="off", graphs_fallback=reason))


def _check_fingerprint(task_cfg: Mapping[str, Any], task: Any) -> None:
    """A cell made for data of a given fingerprint runs on that data only (a worker whose registered
    dataset loads something else fails, recorded, rather than running another graph under the id)."""
    expected = task_cfg.get("fingerprint")
    if expected is not None and task.fingerprint() != expected:
        raise RuntimeError(f"dataset {task_cfg['dataset']!r} loads other data here (fingerprint {task.fingerprint()}) "
                           f"than its cells were made for ({expected}): register the same data in every process "
                           "that runs them (zoo bench --import MODULE)")


def _replica_by_replica(job: GroupJob, callbacks: Sequence[Any], tasks: Optional[TaskCache]) -> Outcome:
    """A stacked group that failed, run again one replica at a time: the replicas that fail are
    recorded failed on their own, the others finish (a replica's numbers do not depend on its
    group: each is seeded by its own seed, tested equal alone and stacked)."""
    results, failures, errors = [], {}, []
    for cell in job.cells:  # no resume state: the group's own stays for a re-run; a retry leaves no files
        alone = execute_group(dataclasses.replace(job, cells=[cell], resume_every=None), callbacks, tasks)
        if alone.status == REDO:  # this process is suspect now: the whole group again, elsewhere
            return eager_redo(job, alone.error)
        if alone.status == "ok":
            results += alone.results
        elif alone.status == "failed":
            failures[cell.id], errors = alone.error, errors + [alone.error]
        else:  # skipped: the data went away; the whole job says so
            return Outcome(job, alone.status, error=alone.error)
    if not results:
        return Outcome(job, "failed", error=errors[0])
    return Outcome(job, "ok", results, failures=failures)


# --------------------------------------------------------------------------- records


def make_record(suite: Suite, cell: Cell, res: RunResult, extra: Dict[str, Any]) -> Dict[str, Any]:
    """A finished run's record (``extra`` comes from :func:`execute_group`)."""
    return {
        "id": cell.id, "group": cell.group, "suite": suite.name, "quick": suite.quick, "status": records.OK,
        "config": cell.config, "seed": cell.seed,
        "metrics": res.metrics, "train_loss": res.train_loss, "val_loss": res.val_loss,
        "epochs_to_best": res.best_epoch, "epochs_run": res.epochs_run, "stop_reason": res.stop_reason,
        "diverged": res.diverged, "diverged_epoch": res.diverged_epoch,
        "wall_time_s": res.wall_time_s / max(extra["group_size"], 1), "time_per_epoch_s": res.time_per_epoch_s,
        "num_parameters": res.num_parameters,
        "finished_at": _now(), **res.extra, **extra,
    }


def failed_record(suite: Suite, cell: Cell, error: str, attempts: int, executor: str) -> Dict[str, Any]:
    """A run whose group raised or whose worker died: kept for the record, ignored by the
    leaderboard, and retried by the next run (``records.completed_ids`` skips it)."""
    return {"id": cell.id, "group": cell.group, "suite": suite.name, "quick": suite.quick, "status": records.FAILED,
            "config": cell.config, "seed": cell.seed, "error": error, "attempts": attempts, "executor": executor,
            "finished_at": _now()}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# --------------------------------------------------------------------------- the driver


def _chunks(cells: List[Cell], size: Optional[int]) -> List[List[Cell]]:
    if not size or size >= len(cells):
        return [cells]
    return [cells[i:i + size] for i in range(0, len(cells), size)]


def _abs_paths(value: str) -> str:
    return os.pathsep.join(str(Path(p).expanduser().resolve()) if p else p for p in value.split(os.pathsep))


def data_env() -> Dict[str, str]:
    """The driver's data locations, as absolute paths, for workers (``ZOO_DATA``, ``ZOO_DATA_MIRROR``), and
    the user's modules it imported (``--import``, a suite's ``plugins``: their registered datasets and models)."""
    return {**{k: _abs_paths(os.environ[k]) for k in ("ZOO_DATA", "ZOO_DATA_MIRROR") if os.environ.get(k)},
            **worker_env()}


def make_jobs(suite: Suite, cells: Sequence[Cell], options: RunOptions,
              resume_dir: Optional[PathLike] = None) -> List[GroupJob]:
    """Pending cells -> jobs: one per group (split by ``options.max_replicas``), or one per cell
    unstacked; each job's ``cost`` is its estimated seconds (:mod:`zoo.bench.plan.cost`)."""
    groups: Dict[str, List[Cell]] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    root = None if options.data_root is None else str(Path(options.data_root).expanduser().resolve())
    env = data_env()
    chunks = [chunk for g in groups.values()
              for chunk in (_chunks(g, options.max_replicas) if options.stacked else [[c] for c in g])]
    ckpt = None if resume_dir is None else str(Path(resume_dir).expanduser().resolve())
    return [GroupJob(i, chunk, suite.mode, options.device, options.stacked, root, env, group_cost(chunk),
                     options.save_weights, ckpt, options.resume_every, options.cuda_graphs)
            for i, chunk in enumerate(chunks)]


def _executor(options: RunOptions, jobs: int) -> Executor:
    """The executor the options name, with its worker count (``"auto"``: by jobs and device)."""
    if isinstance(options.executor, Executor):
        return options.executor
    workers = options.workers
    n = 1 if options.ray else auto_workers(jobs, options.device) if workers == "auto" else int(workers)
    threads = options.threads
    if threads is None and options.executor == "local" and resolve_device(options.device).type == "cpu":
        threads = 1
    return make_executor(options.executor, workers=n, quiet=options.quiet, env=data_env(), threads=threads)


def run_suite(suite: Suite, out: PathLike, options: Optional[RunOptions] = None) -> RunSummary:
    """Run every pending cell of ``suite`` into ``out`` as ``options`` say (:class:`RunOptions`; see the
    module docstring).

    An ``out`` holding another or an edited suite's results is refused (``records.check_same_suite``;
    ``options.force_new`` moves them into ``out/superseded-<time>/`` first).  ``options.where`` /
    ``options.shard`` select part of the suite (:mod:`zoo.bench.suite.selection`, :mod:`zoo.bench.plan.shards`);
    ids stay the full suite's.  Groups run in this process by default, with one torch thread on the
    CPU (Cora GAT L=10, 3 replicas, 10 epochs: 2.4 s with 1 thread, 41 s with 2 threads beside one
    other busy process; docs/benchmarks.md); ``options.workers`` uses the other cores.
    """
    options = RunOptions() if options is None else options
    options.check_here()
    out = user_path(out)
    cells = select(suite, options.where, options.shard)
    _check_cpu_modes(cells, options)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / records.RESULTS_FILE
    t0 = time.perf_counter()
    with _lock(out):
        resolved = suite.resolved()  # the full suite: a slice / shard keeps the full suite's ids
        records.check_same_suite(out, resolved, force_new=options.force_new)
        info = selection_info(options.where, options.shard)
        if info is not None:
            resolved["selection"] = info
        write_atomic(out / "suite.resolved.json", json.dumps(resolved, indent=1, sort_keys=True, default=str))
        done = records.completed_ids(results_path)
        pending = [c for c in cells if c.id not in done]
        jobs = make_jobs(suite, pending, options, out / RESUME_DIR)
        if options.stop_after is not None:
            jobs = jobs[:options.stop_after]
        ex = _executor(options, len(jobs))
        summary = RunSummary(out=out, total=len(cells), already_done=len(cells) - len(pending), ran=0,
                             executor=ex.describe())
        try:
            _run_jobs(suite, jobs, ex, TaskCache(options.data_root), results_path, summary,
                      quiet=options.quiet or not jobs, pending=len(pending))
        finally:
            write_atomic(out / "skipped.json", json.dumps(summary.skipped, indent=1, sort_keys=True))
    summary.wall_time_s = time.perf_counter() - t0
    return summary


def _check_cpu_modes(cells: Sequence[Cell], options: RunOptions) -> None:
    """``flush_subnormals`` cells on a GPU are refused before any group runs (the trainer refuses each)."""
    if options.ray or resolve_device(options.device).type == "cpu":
        return
    flushed = [c.id for c in cells if c.config["train"].get("flush_subnormals")]
    if flushed:
        raise ValueError(f"{len(flushed)} cell(s) set flush_subnormals, a CPU mode (x86 FTZ/DAZ) that would change "
                         f"nothing on {options.device or 'cuda'}: run them with --device cpu or drop the key")


def _run_jobs(suite: Suite, jobs: List[GroupJob], ex: Executor, tasks: TaskCache, results_path: Path,
              summary: RunSummary, quiet: bool, pending: int) -> None:
    """Hand the jobs to the executor and log each outcome as it comes (the bar counts runs)."""
    if not isinstance(ex, LocalExecutor):  # longest first: the last job to start is a short one
        jobs.sort(key=lambda j: (-j.cost, j.index))
        end_startup()  # the groups train in workers: this process's start-up ends here (zoo._gc)
    work = functools.partial(execute_group, tasks=tasks) if isinstance(ex, LocalExecutor) else execute_group
    # Nothing pending (all done, or skipped): no bar at all, not an empty "0it" line.
    bar = tqdm(total=pending, desc=f"{suite.name}", unit="run", disable=quiet, dynamic_ncols=True)
    in_flight = [0]

    def started(job: GroupJob) -> None:  # worker pools report nothing until a group ends: show what runs
        in_flight[0] += len(job.cells)
        bar.set_postfix_str(f"{in_flight[0]} run(s) in flight")

    ex.on_start = started
    try:
        outcomes = ex.run(jobs, work)
        try:
            for outcome in outcomes:
                _log_outcome(suite, outcome, results_path, summary, ex.name)
                in_flight[0] -= len(outcome.job.cells)
                bar.set_postfix_str(f"{in_flight[0]} run(s) in flight", refresh=False)
                bar.update(len(outcome.job.cells))
        finally:  # on any exit (Ctrl-C, a write error) the executor stops its workers now
            getattr(outcomes, "close", lambda: None)()
    finally:
        bar.close()


def _log_outcome(suite: Suite, outcome: Outcome, results_path: Path, summary: RunSummary, executor: str) -> None:
    """The only place records are written: one atomic line per run, in the driver."""
    cells = outcome.job.cells
    if outcome.status == REDO:  # an executor that runs no re-runs: failed, so the next run retries it
        outcome = Outcome(outcome.job, "failed", error=f"its CUDA graphs failed ({outcome.error}) and the executor "
                                                        "did not run it again eagerly")
    if outcome.status == "skipped":
        for c in cells:
            summary.skipped[c.id] = outcome.error
    elif outcome.status == "failed":
        for c in cells:
            records.append_record(results_path, failed_record(suite, c, outcome.error, outcome.attempts, executor))
            summary.failed[c.id] = outcome.error
    else:
        for c in cells:
            if c.id in outcome.failures:  # failed on its own; its group's other replicas finished
                records.append_record(results_path, failed_record(suite, c, outcome.failures[c.id], outcome.attempts,
                                                                  executor))
                summary.failed[c.id] = outcome.failures[c.id]
        for cell, res, extra in outcome.results:
            data = extra.pop("weights_data", None)
            if data is not None:  # the model file first: a record never names a file that is not there
                extra = {**extra, "weights": write_weights(results_path.parent, cell.id, data),
                         "weights_bytes": len(data)}
            records.append_record(results_path, make_record(suite, cell, res, extra))
            summary.ran += 1
            summary.diverged += int(res.diverged)
        # the records are written: the group's resume file (if it made one) is not needed any more
        remove_resume_file(results_path.parent, cells, outcome.job.stacked)

