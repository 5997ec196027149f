"""Re-running committed records to see whether they come out again: ``zoo report --recheck N``.

N records of the report's folders are drawn at random (among those a budget allows) and run again,
cheapest first, from the shipped suite into a fresh folder.  Per record: whether the re-run has
the same cell id (the shipped suite and code still make the cell the record was made of), the
same epochs, the same metric (bitwise, or within :data:`TOLERANCE`), and whether the report's
status of its cell would change with the re-run's value in place of the record's.

The determinism contract (docs/reliability.md): a re-run on the same machine, threads and build
(the record's ``float_order``) is bitwise equal; elsewhere float summation order differs and long
runs split, so only the distribution is the same, which the status rule's intervals and margins
must tolerate.  The exit status fails on what the contract forbids: a cell id that changed, or a
result that differs where the record was made by this code (its commit) with this machine's float order.
"""
from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from zoo._names import normalize_name
from zoo.bench.analyze import board as lb
from zoo.bench.report import shipped
from zoo.bench.report import status as rp
from zoo.bench.report.notes import Note
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.run.provenance import float_order, git_commit
from zoo.bench.store import records as store
from zoo.bench.store.folders import read_folder
from zoo.bench.suite.cells import cell_value
from zoo.bench.suite.load import load_suite
from zoo.bench.suite.measures import metric_spec
from zoo.bench.suite.selection import varying_keys

PathLike = Union[str, Path]
#: relative difference below which two metric values count as equal up to float noise
TOLERANCE = 1e-9


@dataclass
class Candidate:
    suite: str
    folder: Path
    record: Dict[str, Any]

    @property
    def cost_s(self) -> float:
        return float(self.record.get("wall_time_s") or 0.0)


@dataclass
class Outcome:
    """One re-run compared with its record (``ran`` False: not run, ``error`` says why)."""

    candidate: Candidate
    ran: bool = False
    error: str = ""
    new_id: Optional[str] = None
    epochs_equal: Optional[bool] = None
    bitwise: Optional[bool] = None
    rel_diff: Optional[float] = None
    same_float_order: Optional[bool] = None
    #: the record was made by this code (its commit is the checkout's): bitwise is promised only then
    same_code: Optional[bool] = None
    status_before: str = ""
    status_after: str = ""
    seconds: float = 0.0

    @property
    def ids_equal(self) -> bool:
        return self.new_id == self.candidate.record["id"]

    @property
    def within_tolerance(self) -> bool:
        return bool(self.bitwise) or (self.rel_diff is not None and self.rel_diff <= TOLERANCE)

    @property
    def breaks_contract(self) -> bool:
        same_setup = bool(self.same_float_order) and bool(self.same_code)
        return self.ran and (not self.ids_equal or (same_setup and not self.within_tolerance))


def candidates(records_dir: PathLike, suites: Sequence[str]) -> List[Candidate]:
    """Every finished record of a folder of a shipped suite run at its own protocol (no ``--set``,
    not the quick form), in a stable order."""
    out = []
    for folder in rp.record_folders(records_dir):
        _, info, recs, _ = read_folder(folder)
        name = normalize_name(str(info.get("name")))
        if name not in suites or info.get("set") or info.get("quick"):
            continue
        out += [Candidate(name, folder, r) for r in sorted(recs, key=lambda r: r["id"])]
    return out


def draw(pool: Sequence[Candidate], n: int, max_minutes: Optional[float], seed: int) -> List[Candidate]:
    """``n`` records drawn at random (those whose recorded run time fits ``max_minutes`` / n when a
    budget is given), cheapest first."""
    if max_minutes is not None:
        pool = [c for c in pool if c.cost_s <= max_minutes * 60 / max(n, 1)]
    chosen = random.Random(seed).sample(list(pool), min(n, len(pool)))
    return sorted(chosen, key=lambda c: (c.cost_s, c.record["id"]))


def _metric(record: Mapping[str, Any], metric: str) -> Any:
    return record["metrics"].get(metric)


def _relative(a: Any, b: Any) -> Optional[float]:
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [_relative(a.get(k), b.get(k)) for k in set(a) | set(b)]
        return None if any(d is None for d in diffs) else max(diffs, default=0.0)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return None
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def _rerun(c: Candidate, out: Path, data_root: Optional[PathLike]) -> Dict[str, Any]:
    """Run the record's cell of the shipped suite alone into ``out``; its new record."""
    suite = load_suite(c.suite)
    cfg = c.record["config"]
    where = {k: [cell_value(cfg, k)] for k in varying_keys(suite)}
    # the record's thread count where it carries one: the contract's "same threads"
    threads = int((c.record.get("float_order") or {}).get("torch_threads") or 1)
    run_suite(suite, out, RunOptions(device="cpu", quiet=True, where=where, threads=threads, data_root=data_root,
                                     resume_every="off"))
    new = [r for r in store.read_records(out / store.RESULTS_FILE) if not store.is_failed(r)]
    if len(new) != 1:
        raise RuntimeError(f"the re-run gave {len(new)} records, expected 1")
    return new[0]


def _status_change(c: Candidate, new: Mapping[str, Any], suites: Mapping[str, Any],
                   notes: Sequence[Note]) -> Tuple[str, str]:
    """The report's status of the record's cell as committed, and with the re-run's value in its place."""
    s = suites[c.suite]
    report = rp.suite_report(c.folder, notes, s["reported"], s["metric"])
    metric = report.board.layout["metric"]
    geometric = lb.is_log_metric(report.board)
    for rows in report.rows.values():
        for row in rows:
            ids = [r["id"] for r in row.entry.records]
            if c.record["id"] not in ids:
                continue
            if row.agreement is None or row.status == rp.ALTERNATIVE:  # no status to change
                return row.status, row.status
            scale = float(report.board.layout.get("scale", 100.0)) if metric_spec(metric).percent else 1.0
            values = list(row.entry.values)
            value = _metric(new, metric)
            values[ids.index(c.record["id"])] = None if value is None or isinstance(value, dict) else value * scale
            runs = rp.paper_runs(report.info.get("reported"), c.suite, row.entry.reported)
            after = rp.cell_agreement(dataclasses.replace(row.entry, values=values), geometric, runs)
            return row.status, rp.status_of(after, row.note)
    return rp.NO_PAPER, rp.NO_PAPER


def recheck(records_dir: PathLike, n: int, max_minutes: Optional[float] = None, seed: int = 0,
            data_root: Optional[PathLike] = None) -> List[Outcome]:
    """Re-run ``n`` drawn records (module docstring); stops starting new ones once ``max_minutes`` is spent."""
    suites = shipped.suites()
    notes = shipped.notes(records_dir)
    chosen = draw(candidates(records_dir, list(suites)), n, max_minutes, seed)
    here = float_order(torch.device("cpu"))
    outcomes: List[Outcome] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zoo-recheck-") as tmp:
        for i, c in enumerate(chosen):
            o = Outcome(c)
            outcomes.append(o)
            if max_minutes is not None and time.perf_counter() - start > max_minutes * 60:
                o.error = "not run: --max-minutes spent"
                continue
            t0 = time.perf_counter()
            try:
                new = _rerun(c, Path(tmp) / f"{i:03d}-{c.suite}", data_root)
            except Exception as e:  # one line per record; the others still run
                o.error = f"{type(e).__name__}: {e}".splitlines()[0]
                continue
            o.seconds = time.perf_counter() - t0
            metric_name = suites[c.suite]["metric"]
            old_v, new_v = _metric(c.record, metric_name), _metric(new, metric_name)
            o.ran, o.new_id = True, new["id"]
            o.epochs_equal = (c.record.get("epochs_to_best"), c.record.get("epochs_run")) == \
                (new.get("epochs_to_best"), new.get("epochs_run"))
            o.bitwise = old_v == new_v
            o.rel_diff = _relative(old_v, new_v)
            recorded = c.record.get("float_order")
            o.same_float_order = None if recorded is None else _same_order(recorded, here)
            o.same_code = c.record.get("commit") == git_commit()
            o.status_before, o.status_after = _status_change(c, new, suites, notes)
    return outcomes


def _same_order(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> bool:
    return {k: recorded.get(k) for k in here} == dict(here)


def _yes(v: Optional[bool]) -> str:
    return "?" if v is None else "yes" if v else "NO"


def lines(outcomes: Sequence[Outcome]) -> List[str]:
    """The table ``zoo report --recheck`` prints, one line per drawn record, and a summary."""
    out = ["suite | record id | seed | recorded s | re-run s | ids equal | epochs equal | metric | "
           "same code | same float order | status before -> after"]
    for o in outcomes:
        c = o.candidate
        head = f"{c.suite} | {c.record['id']} | {c.record.get('seed', '?')} | {c.cost_s:.1f}"
        if not o.ran:
            out.append(f"{head} | - | {o.error}")
            continue
        metric = "bitwise equal" if o.bitwise else (f"within {TOLERANCE:g} (rel {o.rel_diff:.1e})"
                                                    if o.within_tolerance else
                                                    f"differs (rel {o.rel_diff:.2e})" if o.rel_diff is not None
                                                    else "differs")
        change = o.status_before if o.status_after == o.status_before else \
            f"{o.status_before} -> {o.status_after} (CHANGES)"
        out.append(f"{head} | {o.seconds:.1f} | {_yes(o.ids_equal)} | {_yes(o.epochs_equal)} | {metric} | "
                   f"{_yes(o.same_code)} | {_yes(o.same_float_order)} | {change}")
    ran = [o for o in outcomes if o.ran]
    out.append(f"rechecked {len(ran)} of {len(outcomes)}: ids equal {sum(o.ids_equal for o in ran)}, epochs equal "
               f"{sum(bool(o.epochs_equal) for o in ran)}, metric bitwise {sum(bool(o.bitwise) for o in ran)}, "
               f"within tolerance {sum(o.within_tolerance for o in ran)}, status changes "
               f"{sum(o.status_after != o.status_before for o in ran)}; contract broken: "
               f"{sum(o.breaks_contract for o in outcomes)}")
    return out


__all__ = ["Candidate", "Outcome", "TOLERANCE", "candidates", "draw", "lines", "recheck"]
