"""Leaderboard boards: run records aggregated into tables of summaries (rendered by :mod:`zoo.bench.render`).

Per suite and per dataset (``[leaderboard] table_by``): one table whose rows are the
``rows`` keys (default model / init / norm) and whose columns are the values of ``columns``
(default ``num_layers``).  Each cell is ``mean +- 95% CI (n)`` of the chosen metric over runs
(Student t, :mod:`zoo.bench.analyze.stats`), the paper's number beside it and the difference.
Energies (``laplacian_energy``) are log-normal over seeds: their cells are the geometric mean
with the ``[min … max]`` range in scientific notation, and the difference is taken in log10.
A table without any reported number has no ``paper``/``Δ`` columns.

A suite with a ``[search]`` (hyper-parameters tuned per cell) shows in each cell the runs of the
search point chosen by :mod:`zoo.bench.analyze.best_point` (best mean of the selection metric over
seeds); the cell's :class:`Entry` says which point won and how many of its points have records.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from zoo._names import normalize_name
from zoo.bench.analyze.best_point import Choice, choose, point_key, search_axes, selection_metric
from zoo.bench.analyze.stats import Summary, summarize, summarize_log
from zoo.bench.suite.cells import cell_value
from zoo.bench.suite.measures import METRIC_SPECS, metric_spec
from zoo.bench.suite.settings import describe_settings
from zoo.bench.store import records
from zoo.bench.store.folders import read_folder, read_skipped

PathLike = Union[str, Path]
#: keys of a paper entry that are not cell keys: its number and spread, the runs behind it, where it is from
KEY_META = ("value", "ci95", "std", "spread", "n", "runs", "table", "note", "metric")
#: Metrics summarised geometrically (log-normal over seeds) and compared in log10 (declared in spec.measures).
LOG_METRICS = tuple(name for name, m in METRIC_SPECS.items() if m.geometric)


def _norm(v: Any) -> Any:
    if isinstance(v, str):
        return normalize_name(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _metric_values(rec: Dict[str, Any], metric: str) -> List[Tuple[Any, Optional[float]]]:
    """``[(column override or None, value)]`` for one record."""
    m = rec["metrics"]
    if metric_spec(metric).per_layer:  # {layer: value}: the layer is the column
        return [(int(k), v) for k, v in (m.get(metric) or {}).items()]
    return [(None, m.get(metric))]


# --------------------------------------------------------------------------- aggregation


@dataclass
class Entry:
    table: Any
    row: Tuple[Any, ...]
    column: Any
    summary: Summary
    epochs: Summary
    diverged: int
    reported: Optional[Dict[str, Any]] = None
    #: the resolved config of the cell's first run, to read keys other than rows/columns (zoo.bench.report.status)
    config: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)
    #: the runs' metric values (scaled as the summary; None: a run without the metric), for per-run checks
    values: List[Optional[float]] = field(default_factory=list, repr=False, compare=False)
    #: a searched cell ([search]): the point shown and how it was chosen; None for a cell without a search
    search: Optional[Choice] = field(default=None, compare=False)
    #: the runs' records, in the order of ``values`` (seeds, protocols: what a note may quote)
    records: List[Dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @property
    def diff(self) -> Optional[float]:
        """ours − paper; for geometric summaries log10(ours) − log10(paper) (decades)."""
        if self.reported is None or self.summary.mean is None:
            return None
        paper = float(self.reported["value"])
        if self.summary.kind == "geometric":
            return math.log10(self.summary.mean) - math.log10(paper) if paper > 0 else None
        return self.summary.mean - paper


@dataclass
class Board:
    suite: str
    meta: Dict[str, Any]
    layout: Dict[str, Any]
    entries: List[Entry]
    provenance: Dict[str, Any]
    skipped: Dict[str, str] = field(default_factory=dict)
    runs: int = 0
    #: records left out of the board: ``{"duplicate": n, "not_in_suite": m}`` (see :func:`load_board`)
    dropped: Dict[str, int] = field(default_factory=dict)
    #: ``zoo bench --set`` values of the run, in words (``""``: the suite's own protocol)
    reduced: str = ""


def find_reported(reported: Optional[Dict[str, Any]], config: Dict[str, Any], layout: Dict[str, Any],
                   column: Any) -> Optional[Dict[str, Any]]:
    if not reported:
        return None
    for e in reported["entries"]:
        if e.get("metric", layout["metric"]) != layout["metric"]:
            continue
        ok = True
        for k, v in e.items():
            if k in KEY_META:
                continue
            have = column if (metric_spec(layout["metric"]).per_layer and k == "layer") else cell_value(config, k)
            if _norm(have) != _norm(v):
                ok = False
                break
        if ok:
            return e
    return None


def _place(cfg: Dict[str, Any], layout: Dict[str, Any]) -> Tuple[Any, Tuple[Any, ...]]:
    """A config's (table, row) on the board."""
    table = cell_value(cfg, layout["table_by"]) if layout.get("table_by") else ""
    return table, tuple(cell_value(cfg, k) for k in layout["rows"])


def aggregate(suite_info: Dict[str, Any], recs: Sequence[Dict[str, Any]]) -> Board:
    layout = suite_info["leaderboard"]
    metric = metric_spec(layout["metric"])
    scale = float(layout.get("scale", 100.0)) if metric.percent else 1.0
    axes = search_axes(suite_info)
    buckets: Dict[Tuple[Any, Tuple[Any, ...], Any, str], Dict[str, Any]] = {}
    recs = [r for r in recs if not records.is_failed(r)]  # failed runs have no metrics (re-run retries them)
    for rec in recs:
        cfg = rec["config"]
        table, row = _place(cfg, layout)
        point = point_key(cfg, axes) if axes else ""
        for col_override, value in _metric_values(rec, layout["metric"]):
            col = col_override if col_override is not None else cell_value(cfg, layout["columns"])
            b = buckets.setdefault((table, row, col, point), {"values": [], "epochs": [], "diverged": 0, "config": cfg,
                                                              "records": []})
            b["values"].append(None if value is None else float(value) * scale)
            b["epochs"].append(rec.get("epochs_to_best"))
            b["diverged"] += int(bool(rec.get("diverged")))
            b["records"].append(rec)
    chosen: Dict[Tuple[Any, Tuple[Any, ...], Any], Tuple[str, Optional[Choice]]] = {}
    if axes:
        chosen = _choose_points(suite_info, buckets, axes)
    entries = []
    stat = summarize_log if metric.geometric else summarize
    for (table, row, col, point), b in buckets.items():
        winner, choice = chosen.get((table, row, col), (point, None))
        if point != winner:
            continue
        entries.append(Entry(table, row, col, stat(b["values"]), summarize(b["epochs"]), b["diverged"],
                             find_reported(suite_info.get("reported"), b["config"], layout, col), b["config"],
                             b["values"], choice, b["records"]))
    entries.sort(key=lambda e: (str(e.table), tuple(map(str, e.row)), sort_key(e.column)))
    first = recs[0] if recs else {}
    prov = {"commits": sorted({r.get("commit", "?") for r in recs}), "devices": sorted({r.get("device", "?") for r in recs}),
            "versions": first.get("versions", {}), "cuda_graphs": graph_states(recs)}
    return Board(suite_info["name"], suite_info.get("meta", {}), layout, entries, prov, runs=len(recs),
                 reduced=describe_settings(suite_info))


def graph_states(recs: Sequence[Dict[str, Any]]) -> Dict[str, int]:
    """How the records' epochs ran (their ``cuda_graphs``: ``replayed``, ``eager``, ``eager (why)``,
    ``fell back (why)``) -> runs; ``{}`` when no record says (records older than the field)."""
    if not any("cuda_graphs" in r for r in recs):
        return {}
    states: Dict[str, int] = {}
    for r in recs:
        key = str(r.get("cuda_graphs", "not recorded"))
        states[key] = states.get(key, 0) + 1
    return dict(sorted(states.items()))


def graph_states_text(states: Dict[str, int]) -> str:
    """``; CUDA graphs: 12 replayed, 3 fell back (reason)`` — how the runs' epochs ran, where the records say."""
    return "; CUDA graphs: " + ", ".join(f"{n} {state}" for state, n in states.items()) if states else ""


def _choose_points(suite_info: Dict[str, Any], buckets: Dict[Tuple[Any, Tuple[Any, ...], Any, str], Dict[str, Any]],
                   axes: Sequence[str]) -> Dict[Tuple[Any, Tuple[Any, ...], Any], Tuple[str, Optional[Choice]]]:
    """Per leaderboard cell with more than one search point in the suite: the winning point and its
    :class:`Choice` (:mod:`zoo.bench.analyze.best_point`); cells outside the search keep their one point."""
    layout = suite_info["leaderboard"]
    order: Dict[Tuple[Any, Tuple[Any, ...], Any], List[str]] = {}
    values: Dict[Tuple[Any, Tuple[Any, ...], Any], Dict[str, set]] = {}
    for c in suite_info.get("cells", ()):  # every point of the suite, recorded or not, in suite order
        table, row = _place(c["config"], layout)
        cell = (table, row, cell_value(c["config"], layout["columns"]))
        keys = order.setdefault(cell, [])
        key = point_key(c["config"], axes)
        if key not in keys:
            keys.append(key)
        for k in axes:
            values.setdefault(cell, {}).setdefault(k, set()).add(point_key(c["config"], [k]))
    runs: Dict[Tuple[Any, Tuple[Any, ...], Any], Dict[str, List[Dict[str, Any]]]] = {}
    for (table, row, col, point), b in buckets.items():
        runs.setdefault((table, row, col), {})[point] = b["records"]
    metric = selection_metric(suite_info) or layout["metric"]
    out: Dict[Tuple[Any, Tuple[Any, ...], Any], Tuple[str, Optional[Choice]]] = {}
    for cell, by_point in runs.items():
        points = order.get(cell) or list(by_point)
        points += [p for p in by_point if p not in points]  # records of points the suite no longer has: still shown
        if len(points) < 2:
            continue
        # a cell's point is described by the axes its own search varies ([[search]]: its table's, not every table's)
        tuned = [k for k in axes if len(values.get(cell, {}).get(k, ())) > 1] or list(axes)
        out[cell] = choose(by_point, points, metric, tuned)
    return out


def sort_key(v: Any) -> Tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def load_board(results: PathLike) -> Board:
    """Aggregate one results folder (``results.jsonl`` + ``suite.resolved.json``).

    Only records whose ``id`` is a cell of the folder's resolved suite count; a second record
    with an id already seen (a duplicated line, a re-imported log) is dropped.  How many were
    left out is in ``Board.dropped`` and printed under the tables.
    """
    folder, info, kept, dropped = read_folder(results)
    board = aggregate(info, kept)
    board.dropped = dropped
    board.skipped = read_skipped(folder)
    return board


def dropped_note(board: Board) -> str:
    """One line saying which records were left out of ``board`` (empty if none)."""
    parts = []
    if board.dropped.get("duplicate"):
        parts.append(f"{board.dropped['duplicate']} duplicate record(s) (same run id) ignored")
    if board.dropped.get("not_in_suite"):
        parts.append(f"{board.dropped['not_in_suite']} record(s) of cells not in suite {board.suite!r} ignored")
    if board.dropped.get("failed"):
        parts.append(f"{board.dropped['failed']} failed-run record(s) ignored (a re-run retries them)")
    return "; ".join(parts)


# --------------------------------------------------------------------------- formatting


def fmt(s: Summary, digits: int = 2) -> str:
    if s.mean is None:
        return "–"
    if s.kind == "geometric":  # scientific notation: energies span many decades
        if s.n == 1:
            return f"{s.mean:.2e} (n=1)"
        text = f"{s.mean:.2e} [{s.low:.1e} … {s.high:.1e}] ({s.n})"
        if s.ci95 is not None and math.isfinite(s.ci95):
            # the 95 % CI of the geometric mean, mean ×/÷ 10^ci95 (a status is decided on the interval of
            # the difference from the paper's number, zoo.bench.report.agreement, printed in the Δ column)
            text += f", 95 % CI {s.mean / 10 ** s.ci95:.1e} … {s.mean * 10 ** s.ci95:.1e}"
        return text
    if s.ci95 is None:
        return f"{s.mean:.{digits}f} (n={s.n})"
    return f"{s.mean:.{digits}f} ± {s.ci95:.{digits}f} ({s.n})"


def is_log_metric(board: Board) -> bool:
    return metric_spec(board.layout["metric"]).geometric


def fmt_paper(board: Board, value: Any) -> str:
    return f"{float(value):.2e}" if is_log_metric(board) else f"{float(value):.2f}"


def fmt_diff(board: Board, diff: Optional[float]) -> str:
    return "" if diff is None else f"{diff:+.2f}"


def diff_label(board: Board) -> str:
    return "Δlog10" if is_log_metric(board) else "Δ"


def tables(board: Board) -> Dict[Any, Dict[str, Any]]:
    """``{table: {"columns": [...], "rows": {row: {col: Entry}}}}``."""
    out: Dict[Any, Dict[str, Any]] = {}
    for e in board.entries:
        t = out.setdefault(e.table, {"columns": [], "rows": {}})
        if e.column not in t["columns"]:
            t["columns"].append(e.column)
        t["rows"].setdefault(e.row, {})[e.column] = e
    for t in out.values():
        t["columns"].sort(key=sort_key)
    return out
