"""Executors: *where* a suite's groups run — in this process, in a process pool, on a Ray cluster.

The runner (:mod:`zoo.bench.run.driver`) resolves a suite into :class:`GroupJob` s and hands them
to an executor together with a *work* function (``runner.execute_group``: load the task, train
the group, return one :class:`Outcome`).  An executor only schedules: it yields each group's
outcome as soon as it is known and never writes anything, so the driver alone appends records
(the JSONL stays atomic, resumable and free of duplicates whatever runs the groups).

=========  ===========================================================================
local      the groups one after another in this process (default; a per-epoch progress bar)
process    ``--workers N``: N spawned worker processes, one torch thread each
ray        one Ray task per group (``num_cpus`` / fractional ``num_gpus``), on a local
           Ray instance or the cluster at ``--ray-address``; dead workers are retried
=========  ===========================================================================

Failures never stop a suite: a group whose work raised comes back as ``status="failed"``
with the error (the work function catches it), and a worker that died — after Ray's
``max_retries`` — is turned into a failed outcome here.  A group that comes back as ``redo``
must be run again as ``outcome.redo`` in a *fresh* process, and the process it ran in runs no
more groups (its device state is suspect: a CUDA graph capture or replay raised there, see
:mod:`zoo.trainer.graphs`): ``local`` hands that group and every later one to a new worker
process, ``process`` retires its pool once the groups in flight are done, and ``ray`` runs a group
that may capture in a worker of its own (``max_calls = 1``).  This module knows nothing of
training; ``ray`` is imported only when the Ray executor is used.
"""
from __future__ import annotations

import functools
import multiprocessing
import os
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from zoo.bench.run.lifetime import check_main_module, init_worker
from zoo.trainer.progress import ProgressBar

EXECUTORS = ("local", "process", "ray")
#: an outcome whose job must be run again, as ``outcome.redo``, in a fresh process
REDO = "redo"
DIED = "worker process died while running this group (killed, or out of memory)"
RAY_INSTALL_HINT = "pip install gat-zoo[ray]"


@dataclass
class GroupJob:
    """One unit of work: cells trained together, and what a worker needs to run them anywhere."""

    index: int
    cells: List[Any]                       # zoo.bench.suite.schema.Cell (same group)
    mode: str                              # the suite's mode (train / energy_at_init / prune_layers)
    device: Optional[str]                  # as given by the user; resolved on the worker
    stacked: bool
    data_root: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)   # ZOO_DATA / ZOO_DATA_MIRROR of the driver
    cost: float = 0.0                      # estimated seconds (zoo.bench.plan.cost): longest first
    save_weights: str = "none"             # "best" / "last": send each replica's state back (zoo.bench.run.weights)
    resume_dir: Optional[str] = None   # where a long group saves its state (None: never)
    resume_every: Any = None           # zoo.trainer.resume.ResumePolicy
    cuda_graphs: str = "auto"          # TrainConfig.cuda_graphs: replay the epoch as CUDA graphs
    graphs_fallback: Optional[str] = None  # why this is an eager re-run of a group whose CUDA graphs failed

    @property
    def may_capture(self) -> bool:
        """Whether the group may capture CUDA graphs (a CUDA device, or one chosen on the worker)."""
        return self.cuda_graphs != "off" and str(self.device or "auto").split(":")[0] != "cpu"


@dataclass
class Outcome:
    """What came back for one job: ``ok`` with ``(cell, RunResult, extra)`` per cell, or
    ``skipped`` (data unavailable) / ``failed`` with a reason, or :data:`REDO` with the job to run
    instead in a fresh process (``redo``) and why (``error``).  An ``ok`` job may still hold
    ``failures`` (cell id -> reason): replicas that failed on their own while the others finished."""

    job: GroupJob
    status: str
    results: List[Tuple[Any, Any, Dict[str, Any]]] = field(default_factory=list)
    error: str = ""
    attempts: int = 1
    failures: Dict[str, str] = field(default_factory=dict)
    redo: Optional[GroupJob] = None


def failed(job: GroupJob, error: str) -> Outcome:
    return Outcome(job, "failed", error=error)


Work = Callable[..., Outcome]


def portable(work: "Work") -> "Work":
    """The work function a fresh process can run: a local executor's work may close over this
    process's caches (a ``functools.partial``); a new process runs the function without them."""
    return work.func if isinstance(work, functools.partial) else work


def format_error(exc: BaseException, limit: int = 4000) -> str:
    """The exception and the end of its traceback (records keep it; long ones are cut)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).strip()
    return text if len(text) <= limit else "...\n" + text[-limit:]


class Executor:
    """Runs jobs and yields their outcomes in completion order (never writes anything)."""

    name = "base"
    #: Called with each job as it starts (the driver's progress bar shows the work in flight).
    on_start: Optional[Callable[[GroupJob], None]] = None

    def run(self, jobs: Sequence[GroupJob], work: Work) -> Iterator[Outcome]:  # pragma: no cover
        raise NotImplementedError

    def _started(self, job: GroupJob) -> None:
        if self.on_start is not None:
            self.on_start(job)

    def describe(self) -> str:
        return self.name


# --------------------------------------------------------------------------- local


class LocalExecutor(Executor):
    """Today's loop: one group after another in this process, with a per-epoch progress bar."""

    name = "local"

    def __init__(self, quiet: bool = True, threads: Optional[int] = None) -> None:
        self.quiet = quiet
        self.threads = threads

    def describe(self) -> str:
        return self.name if self.threads is None else f"{self.name} ({self.threads} torch thread(s))"

    def run(self, jobs: Sequence[GroupJob], work: Work) -> Iterator[Outcome]:
        before = torch.get_num_threads()
        pending = list(jobs)
        try:
            while pending:
                job = pending.pop(0)
                self._started(job)
                bars = [] if self.quiet else [group_bar(job)]
                if self.threads is not None:  # set per job: the caller's code may change it in between
                    torch.set_num_threads(self.threads)
                try:
                    outcome = work(job, callbacks=bars)
                finally:
                    for bar in bars:
                        bar.close()
                if isinstance(outcome, Outcome) and outcome.status == REDO:  # no more groups in this process:
                    fresh = ProcessExecutor(1)  # the rest go to a fresh one
                    fresh.on_start = self.on_start
                    yield from fresh.run([outcome.redo, *pending], portable(work))
                    return
                yield outcome
        finally:
            torch.set_num_threads(before)


# --------------------------------------------------------------------------- process pool


def _init_process_worker(driver_pid: int) -> None:
    """One torch thread per worker: N workers on N cores beat N x (all cores) oversubscribed.

    Ctrl-C and SIGTERM reach the whole process group: workers ignore them, so that only the driver
    reports it (one line) and stops them, instead of every worker printing a traceback; a worker
    exits when its driver does, however it ended (:mod:`zoo.bench.run.lifetime`)."""
    init_worker(driver_pid)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # pragma: no cover - already set
        pass


class ProcessExecutor(Executor):
    """``--workers N``: independent groups in N spawned processes (one torch thread each).

    At most N jobs are in flight, so when a worker dies the pool is rebuilt and only the jobs
    that were running are recorded as failed (a re-run retries them).
    """

    name = "process"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def describe(self) -> str:
        return f"process ({self.workers} workers)"

    def run(self, jobs: Sequence[GroupJob], work: Work) -> Iterator[Outcome]:
        check_main_module(f"the process executor ({self.workers} workers)")
        ctx = multiprocessing.get_context("spawn")  # fork would copy the driver's torch threads / locks
        queue = list(jobs)
        inflight: Dict[Future, GroupJob] = {}
        pool: Optional[ProcessPoolExecutor] = None
        retiring = False  # a worker's device state is suspect: no more submissions; a new pool when idle
        try:
            while queue or inflight:
                if retiring and not inflight and pool is not None:
                    pool.shutdown(wait=True)
                    pool, retiring = None, False
                if pool is None:
                    pool = ProcessPoolExecutor(max_workers=min(self.workers, max(len(queue), 1)), mp_context=ctx,
                                               initializer=_init_process_worker, initargs=(os.getpid(),))
                while queue and len(inflight) < self.workers and not retiring:
                    job = queue.pop(0)
                    inflight[pool.submit(work, job)] = job
                    if job.graphs_fallback is None:  # a re-run was reported started already
                        self._started(job)
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                broken = False
                for fut in done:
                    job = inflight.pop(fut)
                    try:
                        outcome = fut.result()
                    except BrokenProcessPool:
                        broken = True
                        outcome = failed(job, DIED)
                    except Exception as e:  # pickling errors and the like: the work itself catches its own
                        outcome = failed(job, format_error(e))
                    if outcome.status == REDO:
                        queue.insert(0, outcome.redo)
                        retiring = True
                        continue
                    yield outcome
                if broken:
                    for fut, job in list(inflight.items()):
                        inflight.pop(fut)
                        yield failed(job, DIED)
                    pool.shutdown(wait=False, cancel_futures=True)
                    pool = None
        finally:
            if pool is not None:
                if inflight:  # interrupted (Ctrl-C, SIGTERM, a write error): stop the running groups now, unrecorded
                    for process in list(getattr(pool, "_processes", {}).values()):
                        process.kill()  # workers ignore SIGTERM (it is the driver's to handle)
                pool.shutdown(wait=not inflight, cancel_futures=True)


# --------------------------------------------------------------------------- ray


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RuntimeError(f"--executor ray needs the optional dependency ray: {RAY_INSTALL_HINT}") from None
    return ray


def _ray_task(work: Work, job: GroupJob, threads: int) -> Outcome:
    """Runs on a Ray worker: torch threads = the CPUs Ray granted, then the runner's work."""
    torch.set_num_threads(max(1, threads))
    return work(job)


def _ray_task_alone(work: Work, job: GroupJob, threads: int) -> Outcome:
    """:func:`_ray_task` for a group that may capture CUDA graphs: registered with ``max_calls = 1``
    (a worker exits after it), so a failed capture never leaves a suspect worker to later groups."""
    return _ray_task(work, job, threads)


class RayExecutor(Executor):
    """One Ray task per group; results are streamed back (``ray.wait``) as tasks finish.

    Without ``address`` a local Ray instance is started (``num_cpus`` of this machine unless
    given) and shut down at the end; with ``address`` the driver joins that cluster.  When Ray
    is already initialised in this process (tests, notebooks) that session is used as is.
    ``max_retries`` is Ray's retry count for tasks whose worker died (node lost, killed, OOM);
    exceptions raised by the work are not retried (the work records them as failed).
    """

    name = "ray"

    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None, cpus_per_group: float = 1.0,
                 gpus_per_group: float = 0.0, max_retries: int = 3, env: Optional[Dict[str, str]] = None) -> None:
        if cpus_per_group <= 0:
            raise ValueError(f"--cpus-per-group must be > 0, got {cpus_per_group}")
        if gpus_per_group < 0:
            raise ValueError(f"--gpus-per-group must be >= 0, got {gpus_per_group}")
        if max_retries < 0:
            raise ValueError(f"--max-retries must be >= 0, got {max_retries}")
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_group = cpus_per_group
        self.gpus_per_group = gpus_per_group
        self.max_retries = max_retries
        self.env = dict(env or {})

    def describe(self) -> str:
        return f"ray ({self.address or 'local'}, {self.cpus_per_group:g} cpu / {self.gpus_per_group:g} gpu per group)"

    def _connect(self, ray: Any) -> bool:
        """Initialise Ray unless it already is; True when this executor must shut it down."""
        if ray.is_initialized():
            return False
        kwargs: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "runtime_env": {"env_vars": self.env} if self.env else None}
        if self.address:
            ray.init(address=self.address, **kwargs)
        else:
            ray.init(num_cpus=self.num_cpus or os.cpu_count(), **kwargs)
        return True

    def run(self, jobs: Sequence[GroupJob], work: Work) -> Iterator[Outcome]:
        ray = import_ray()
        if not jobs:
            return
        started = self._connect(ray)
        options = dict(num_cpus=self.cpus_per_group, num_gpus=self.gpus_per_group, max_retries=self.max_retries,
                       retry_exceptions=False)
        remote = ray.remote(_ray_task).options(**options)
        alone = ray.remote(max_calls=1)(_ray_task_alone).options(**options)  # max_calls is not an .options() key
        threads = max(1, int(self.cpus_per_group))
        refs: Dict[Any, GroupJob] = {}

        def submit(job: GroupJob) -> None:  # a group that may capture CUDA graphs gets a worker of its own
            refs[(alone if job.may_capture else remote).remote(work, job, threads)] = job

        try:
            for job in jobs:
                submit(job)
                self._started(job)  # queued on the cluster: in flight from the driver's point of view
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                for ref in ready:
                    job = refs.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as e:  # worker died max_retries + 1 times, or similar
                        outcome = failed(job, f"{type(e).__name__}: {_short(e)}")
                        outcome.attempts = self.max_retries + 1
                    if outcome.status == REDO:
                        submit(outcome.redo)
                        continue
                    yield outcome
        finally:
            for ref in refs:  # driver interrupted: cancel what is still queued / running
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # pragma: no cover - best effort on the way out
                    pass
            if started:
                ray.shutdown()


def _short(e: BaseException, limit: int = 2000) -> str:
    text = str(e).strip()
    return text if len(text) <= limit else text[:limit] + " ..."


# --------------------------------------------------------------------------- helpers


def group_bar(job: GroupJob) -> ProgressBar:
    """A group's per-epoch bar (a training callback): drawn at its first epoch, so a group skipped or
    failed before training leaves no line, and only on a terminal (a log would get its escapes)."""
    return ProgressBar(job.cells[0].epochs, desc=group_label(job), show_best=False,
                       only_terminal=True)


def group_label(job: GroupJob) -> str:
    c = job.cells[0].config
    depth = c["model"]["kwargs"].get("num_layers", "")
    return f"{c['task']['dataset']} {c['model']['name']} L={depth} x{len(job.cells)}"


def auto_workers(jobs: int, device: Optional[str]) -> int:
    """``--workers auto``: one process per core (capped by the jobs) on CPU; 1 on a GPU, where one
    process stacks the replicas and several would only contend for the device.

    The CLI's default (``zoo bench`` without ``--workers``): on the 2-core machine the quick suite
    measured faster with 2 workers than in-process, the spawn + torch/zoo import per worker
    included (docs/distributed.md).  ``RunOptions``'s own default stays 1 (library use, tests).
    """
    if device not in (None, "auto", "cpu"):
        return 1
    if device in (None, "auto") and torch.cuda.is_available():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, jobs))


def make_executor(name: str = "local", *, workers: int = 1, quiet: bool = True, ray_address: Optional[str] = None,
                  ray_num_cpus: Optional[int] = None, cpus_per_group: float = 1.0, gpus_per_group: float = 0.0,
                  max_retries: int = 3, env: Optional[Dict[str, str]] = None,
                  threads: Optional[int] = None) -> Executor:
    """The executor by name (checked by :class:`~zoo.bench.run.options.RunOptions`); ``local`` with
    ``workers > 1`` means ``process``.

    ``threads``: torch intra-op threads of the ``local`` executor (``None``: torch's default).
    """
    if name == "ray":
        return RayExecutor(ray_address, ray_num_cpus, cpus_per_group, gpus_per_group, max_retries, env)
    if name == "process" or workers > 1:
        return ProcessExecutor(workers)
    return LocalExecutor(quiet=quiet, threads=threads)

