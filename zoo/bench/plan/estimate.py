"""``zoo bench SUITE --estimate``: what a selection of a suite will cost, before running it.

Each pending group's time comes from the calibrated cost model (:mod:`zoo.bench.plan.cost`; on the
CPU a group's CPU time, its wall time on an idle core) at its *expected* epochs: the suite's cap, or — where the suite stops early (patience, a loss
threshold) and records exist — the median of the finished groups' epochs: the slice's trained by the same
``train`` table, else the slice's, else the suite's other slices' trained by the same table.  Groups
are scheduled as the runner schedules them (longest first, each to the least-loaded worker), so
the wall time of a slice or of the whole selection is that schedule's makespan.

Every wall and CPU time includes what a command pays outside its groups (:class:`CommandCosts`,
from the cost model): each process's start (the imports before its first group) and exit (the
interpreter's teardown of them), and the leaderboard written at the end.  On the wall clock the
spawned workers start and exit side by side, so that is one worker's start and exit beside the
driver's; the CPU time counts every process's.  A slice's times are those of its own command,
which starts its own processes and writes its own leaderboard.

Slices are the cells sharing the values of ``by`` (default: dataset and depth, where they vary);
each comes with the ``--where`` clauses that select it, so a line of the table is a command.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.plan.cost import CostModel, expected_epochs, measures_once

#: a slice that fits "a few hours on 2 cores" runs here; longer ones need a GPU (or a cluster)
RUNS_HERE_CPU_HOURS = 6.0
DEFAULT_BY = ("dataset", "num_layers")


@dataclass(frozen=True)
class CommandCosts:
    """Seconds a ``zoo bench`` command pays outside its groups (:class:`CostModel`'s measured constants)."""

    process_start_s: float = 0.0   # per process: the driver, each spawned worker
    process_exit_s: float = 0.0    # per process, after its last group
    report_s: float = 0.0          # once, the leaderboard after the last group (0: --no-leaderboard)

    @classmethod
    def of(cls, model: CostModel, report: bool = True) -> "CommandCosts":
        return cls(model.process_start_s, model.process_exit_s, model.report_s if report else 0.0)

    @property
    def per_process(self) -> float:
        return self.process_start_s + self.process_exit_s


@dataclass
class SliceEstimate:
    """One slice: its ``--where`` values, what is pending and what it should cost."""

    key: Tuple[Tuple[str, Any], ...]
    runs: int = 0
    groups: int = 0
    epochs: List[float] = field(default_factory=list)    # expected epochs per pending group
    group_seconds: List[float] = field(default_factory=list)
    done: int = 0
    costs: CommandCosts = CommandCosts()
    executor: str = "local"
    workers: int = 1

    @property
    def cpu_seconds(self) -> float:
        return run_seconds(self.group_seconds, self.workers, self.executor, self.costs)[0]

    def wall_seconds(self, workers: int) -> float:
        return run_seconds(self.group_seconds, workers, self.executor, self.costs)[1]

    @property
    def expected_epochs(self) -> Optional[float]:
        return statistics.median(self.epochs) if self.epochs else None

    def where(self) -> str:
        return " ".join(f"--where {k}={format_value(v)}" for k, v in self.key)

    @property
    def runs_here(self) -> bool:
        return self.cpu_seconds / 3600.0 <= RUNS_HERE_CPU_HOURS


@dataclass
class Estimate:
    suite: str
    slices: List[SliceEstimate]
    workers: int
    executor: str
    device: str
    fitted_on: str
    costs: CommandCosts = CommandCosts()

    @property
    def runs(self) -> int:
        return sum(s.runs for s in self.slices)

    @property
    def groups(self) -> int:
        return sum(s.groups for s in self.slices)

    @property
    def cpu_seconds(self) -> float:
        return run_seconds(self._groups, self.workers, self.executor, self.costs)[0]

    @property
    def wall_seconds(self) -> float:
        return run_seconds(self._groups, self.workers, self.executor, self.costs)[1]

    @property
    def _groups(self) -> List[float]:
        return [g for s in self.slices for g in s.group_seconds]


def run_seconds(groups: Sequence[float], workers: int, executor: str, costs: CommandCosts) -> Tuple[float, float]:
    """``(CPU, wall)`` seconds of one ``zoo bench`` command running ``groups``: the driver's start,
    the groups in this process (one worker, or ``local``) or on the spawned workers (at most one
    per group, which start and exit side by side while the driver waits), the leaderboard, the
    driver's exit."""
    if not groups:
        return 0.0, 0.0
    used = 1 if executor == "local" else max(1, min(int(workers), len(groups)))
    spawned = used if used > 1 and executor != "local" else 0
    cpu = sum(groups) + costs.per_process * (1 + spawned) + costs.report_s
    wall = makespan(groups, used) + costs.per_process * (1 + (1 if spawned else 0)) + costs.report_s
    return cpu, wall


def makespan(seconds: Sequence[float], workers: int) -> float:
    """Wall time of jobs run longest first, each on the least-loaded of ``workers``."""
    loads = [0.0] * max(int(workers), 1)
    for s in sorted(seconds, reverse=True):
        i = min(range(len(loads)), key=lambda k: (loads[k], k))
        loads[i] += s
    return max(loads) if loads else 0.0


def format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def stops_early(train: Mapping[str, Any]) -> bool:
    """Whether a cell's training may end before its cap (patience or a loss threshold)."""
    return bool(train.get("patience")) or float(train.get("loss_threshold") or 0.0) > 0.0


def _protocol(config: Mapping[str, Any]) -> str:
    """The cell's training table (optimizer, learning rate, stopping rule...) as a key."""
    return json.dumps(config.get("train") or {}, sort_keys=True, default=str)


def expected_epochs_of(finished: Sequence[Mapping[str, Any]],
                       key_of: Callable[[Mapping[str, Any]], Any]) -> Callable[[Mapping[str, Any]], float]:
    """``config -> epochs`` its pending group is expected to run: the cap, or, where the cell's
    training stops early (:func:`stops_early`), the median epochs of the ``finished`` groups (``ok``
    records; a group ran as long as its longest run) of its slice (``key_of``) trained by the same
    ``train`` table, else of its slice, else of the other slices' groups trained by the same ``train``
    table, if any.  The training table first: within one slice an Adam group can stop after a fifth of
    the epochs an SGD group runs to its cap; and a slice not run yet stops as the suite's groups trained
    alike did, not at the cap (oxford_table4's datasets all stop by patience at 280-1 300 of 2 000 epochs)."""
    by_slice: Dict[Any, Dict[str, int]] = {}
    by_protocol: Dict[Any, Dict[str, int]] = {}
    by_train: Dict[str, Dict[str, int]] = {}
    for r in finished:
        if r.get("status", "ok") == "ok" and r.get("config"):
            gid = r.get("group", r.get("id"))
            for grp in (by_slice.setdefault(key_of(r["config"]), {}),
                        by_protocol.setdefault((key_of(r["config"]), _protocol(r["config"])), {}),
                        by_train.setdefault(_protocol(r["config"]), {})):
                grp[gid] = max(grp.get(gid, 0), int(r.get("epochs_run") or 0))

    def epochs_of(config: Mapping[str, Any]) -> float:
        train = config.get("train") or {}
        cap = int(train.get("epochs") or 0)
        seen: List[int] = []
        if stops_early(train):
            key = key_of(config)
            seen = list((by_protocol.get((key, _protocol(config))) or by_slice.get(key)
                         or by_train.get(_protocol(config)) or {}).values())
        return expected_epochs(cap, seen)
    return epochs_of


def estimate(suite_name: str, mode: str, groups: Mapping[str, Sequence[Any]], model: CostModel,
             table: Mapping[str, Mapping[str, Any]], value_of: Callable[[Mapping[str, Any], str], Any],
             by: Sequence[str] = DEFAULT_BY, finished: Sequence[Mapping[str, Any]] = (), done: Sequence[str] = (),
             workers: int = 1, executor: str = "local", device: str = "cpu", report: bool = True) -> Estimate:
    """Per slice of ``groups`` (``{job id: [cells]}``, pending cells only; ``cells`` carry
    ``.config`` and ``.group``): runs, groups, expected epochs and seconds.

    ``finished``: records of the suite (their ``epochs_run`` give a slice's median epochs when
    the suite stops early); ``done``: ids already run (counted per slice, not estimated);
    ``value_of(config, key)``: a cell's value of a suite key (``spec`` / ``leaderboard.cell_value``);
    ``report``: the command writes its leaderboard at the end (``--no-leaderboard``: it does not).
    """
    costs = CommandCosts.of(model, report)
    all_cells = [c for cells in groups.values() for c in cells]
    by = [k for k in by if len({repr(value_of(c.config, k)) for c in all_cells}) > 1] or \
        [k for k in by if all_cells and value_of(all_cells[0].config, k) is not None][:1]

    def key_of(config: Mapping[str, Any]) -> Tuple[Tuple[str, Any], ...]:
        return tuple((k, value_of(config, k)) for k in by)

    epochs_of = expected_epochs_of(finished, key_of)
    slices: Dict[Any, SliceEstimate] = {}
    for cells in groups.values():
        c = cells[0].config
        key = key_of(c)
        sl = slices.setdefault(key, SliceEstimate(key, costs=costs, executor=executor, workers=max(int(workers), 1)))
        epochs = epochs_of(c)
        sl.runs += len(cells)
        sl.groups += 1
        sl.epochs.append(0.0 if measures_once(mode) else epochs)
        sl.group_seconds.append(model.group_seconds([cc.config for cc in cells], epochs, table, mode, suite_name))
    done_ids = set(done)
    if done_ids:
        for r in finished:
            if r.get("id") in done_ids and r.get("config"):
                slices.setdefault(key_of(r["config"]), SliceEstimate(key_of(r["config"]))).done += 1
    ordered = sorted(slices.values(), key=lambda s: tuple(_sortable(v) for _, v in s.key))
    return Estimate(suite_name, ordered, max(int(workers), 1), executor, device, model.fitted_on, costs)


def _sortable(v: Any) -> Tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def hours(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.4 h``, ``5.2 d``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def format_estimate(est: Estimate, command: str) -> str:
    """The ``--estimate`` table (plain text, one line per slice, then the total); on a ``cuda`` device
    the times are GPU times by the model's ``cuda`` entry, and the CPU class column is left out."""
    gpu = est.device.split(":")[0] == "cuda"
    head = (f"{est.suite}: estimate for {est.executor} with {est.workers} worker(s) on {est.device} "
            f"(cost model: {est.fitted_on})")
    rows = [("slice", "runs", "groups", "epochs", "GPU time" if gpu else "CPU time", "wall time", "class")]
    for s in est.slices:
        ep = s.expected_epochs
        rows.append((s.where() or "(all)", str(s.runs) + (f" (+{s.done} done)" if s.done else ""), str(s.groups),
                     "-" if ep is None else f"{ep:.0f}", hours(s.cpu_seconds), hours(s.wall_seconds(est.workers)),
                     "runs here" if s.runs_here else "needs a GPU"))
    rows.append(("total", str(est.runs), str(est.groups), "", hours(est.cpu_seconds), hours(est.wall_seconds), ""))
    if gpu:
        rows = [r[:-1] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head, ""] + ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w)
                                    in enumerate(zip(r, widths))).rstrip() for r in rows]
    lines.append("")
    if gpu:
        lines.append(f"run a slice: {command} --where ... --device cuda  (the estimate assumes the records' GPU; "
                     "a group's time is its wall time beside the other workers' groups on that one GPU)")
    else:
        lines.append(f"run a slice: {command} --where ...  (the estimate assumes the records' machine: a "
                     "shared 2-core CPU; 'runs here' = at most "
                     f"{RUNS_HERE_CPU_HOURS:g} CPU-hours)")
    c = est.costs
    if c.per_process:
        report = f" and {hours(c.report_s)} for the leaderboard" if c.report_s else ""
        lines.append(f"each command's times include {hours(c.process_start_s)} + {hours(c.process_exit_s)} per "
                     "process (the driver and each worker import torch, PyG and the zoo before their first group, "
                     f"and tear them down at exit){report}")
    return "\n".join(lines)


__all__ = ["estimate", "Estimate", "SliceEstimate", "CommandCosts", "format_estimate", "makespan", "run_seconds",
           "hours", "RUNS_HERE_CPU_HOURS", "DEFAULT_BY"]
