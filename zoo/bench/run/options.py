"""How to run a suite (not what: that is the suite's cells): :class:`RunOptions`.

Built once — by ``zoo bench`` / ``zoo train`` from their flags, or in Python — and handed to
:func:`zoo.bench.run.driver.run_suite`.  Every option is checked here, when the object is made, with
one line naming the problem and the fix (whether this machine has the device asked for is checked
when the run starts, :meth:`RunOptions.check_here`); the driver, the jobs and the executors take
them as given.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import unknown_name_error
from zoo.bench.run.executors import EXECUTORS, Executor, RayExecutor
from zoo.bench.store.weights import check_save_weights
from zoo.trainer.cells import resolve_device
from zoo.trainer.config import TrainConfig
from zoo.trainer.resume import ResumePolicy, parse_every

PathLike = Union[str, Path]

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """The runner's options (``zoo bench --help`` names each flag after its field).

    Attributes:
        device: ``cpu``, ``cuda``, ``cuda:1`` (``None``: cuda where available).
        executor: ``"local"`` (this process), ``"process"`` (``workers`` processes), ``"ray"``, or an
            :class:`~zoo.bench.run.executors.Executor`.
        workers: processes of the ``process`` executor (``"auto"``: one per core, capped by the groups,
            :func:`~zoo.bench.run.executors.auto_workers`; more than 1 makes ``local`` a pool).
        threads: torch threads for groups run in this process (``None``: 1 on the CPU; the zoo's
            graphs are small, and several threads mostly wait on each other when cores are shared).
        stacked: train a group's cells as stacked replicas (``False``: one at a time, the reference);
            ``max_replicas`` caps the replicas stacked at once (memory).
        where, shard: run part of the suite (``{key: [values]}``; ``(i, n)``, 1-based); ids stay the full suite's.
        data_root: where datasets are kept (default ``$ZOO_DATA``).
        save_weights: ``"none"``, ``"best"`` (the selected epoch's state) or ``"last"``: each run's model
            file beside its record (:mod:`zoo.bench.store.weights`).
        resume_every: a group training longer than this saves its state and a re-run resumes it
            (``600``, ``"10m"``, ``"50ep"``, ``"off"``; default 10 minutes; kept as a
            :class:`~zoo.trainer.resume.ResumePolicy`).
        cuda_graphs: ``"auto"`` / ``"on"`` / ``"off"``: replay each epoch as CUDA graphs (no number depends on it).
        force_new: move another (or an edited) suite's results out of the way instead of refusing them.
        quiet: no progress bars.  ``stop_after``: stop after that many groups (tests).
    """

    device: Optional[str] = None
    executor: Union[str, Executor] = "local"
    workers: Union[int, str] = 1
    threads: Optional[int] = None
    stacked: bool = True
    max_replicas: Optional[int] = None
    where: Optional[Mapping[str, Sequence[Any]]] = None
    shard: Optional[Tuple[int, int]] = None
    data_root: Optional[PathLike] = None
    save_weights: str = "none"
    resume_every: Union[str, float, ResumePolicy, None] = None
    cuda_graphs: str = "auto"
    force_new: bool = False
    quiet: bool = False
    stop_after: Optional[int] = None

    def __post_init__(self) -> None:
        check_save_weights(self.save_weights)
        _count("max_replicas", self.max_replicas)
        _count("threads", self.threads)
        _count("stop_after", self.stop_after, low=0)
        self._check_executor()
        TrainConfig(cuda_graphs=self.cuda_graphs)  # the value's one check
        if self.shard is not None and not (len(self.shard) == 2 and 1 <= self.shard[0] <= self.shard[1]):
            raise ValueError(f"shard must be (i, n) with 1 <= i <= n (shards are numbered 1..n), got {self.shard!r}")
        if not isinstance(self.resume_every, ResumePolicy):
            object.__setattr__(self, "resume_every", parse_every(self.resume_every))

    def check_here(self) -> None:
        """Whether this machine can run with these options (before any group runs): the device asked
        for is here, and ``cuda_graphs = "on"`` has a CUDA device.  A Ray cluster's workers resolve
        the device on their own machines.  (An estimate of a GPU run needs no GPU: not checked when made.)"""
        if self.ray:
            return
        dev = resolve_device(self.device)  # e.g. cuda asked for but absent
        if self.cuda_graphs == "on" and dev.type != "cuda":
            raise ValueError(f"cuda_graphs = 'on' needs a CUDA device, got {dev}; use 'auto' (CUDA graphs where "
                             "the device has them) or 'off'")

    @property
    def ray(self) -> bool:
        """Whether the groups run on Ray."""
        return self.executor == "ray" or isinstance(self.executor, RayExecutor)

    def _check_executor(self) -> None:
        if not isinstance(self.executor, Executor) and self.executor not in EXECUTORS:
            raise unknown_name_error("executor", self.executor, EXECUTORS)
        if self.workers != "auto" and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                       or self.workers < 1):
            raise ValueError(f"workers must be a number >= 1 or 'auto', got {self.workers!r}")
        if self.ray and self.workers != 1:
            raise ValueError("workers is for the process executor (--workers); with the ray executor (--executor ray) "
                             "the cluster's CPUs set the parallelism (--cpus-per-group / --gpus-per-group per task)")


def _count(name: str, value: Any, low: int = 1) -> None:
    """``value`` is unset or an integer >= ``low`` (bools are no integers)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        what = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{name} must be {what} (or unset), got {value!r}")
