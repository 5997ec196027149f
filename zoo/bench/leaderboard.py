"""Leaderboards from run logs: Markdown, CSV, JSON and a self-contained HTML page with plots.

Per suite and per dataset (``[leaderboard] table_by``): one table whose rows are the
``rows`` keys (default model / init / norm) and whose columns are the values of ``columns``
(default ``num_layers``).  Each cell is ``mean +- 95% CI (n)`` of the chosen metric over runs
(Student t, :mod:`zoo.bench.stats`), the paper's number beside it and the difference.
Energies (``laplacian_energy``) are log-normal over seeds: their cells are the geometric mean
with the ``[min … max]`` range in scientific notation, and the difference is taken in log10.
A table without any reported number has no ``paper``/``Δ`` columns.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from zoo._names import normalize_name
from zoo.bench import records
from zoo.bench.stats import Summary, summarize, summarize_log

PathLike = Union[str, Path]
KEY_META = ("value", "ci95", "std", "spread", "n", "table", "note", "metric")
#: Metrics summarised geometrically (log-normal over seeds) and compared in log10.
LOG_METRICS = ("laplacian_energy",)


# --------------------------------------------------------------------------- reading configs


def cell_value(config: Dict[str, Any], key: str) -> Any:
    """The value of suite key ``key`` in a resolved cell config (defaults filled in)."""
    model, task = config["model"], config["task"]
    if key == "model":
        return model["name"]
    if key in ("init", "norm", "init_kwargs", "norm_kwargs"):
        return model[key]
    if key in ("dataset", "split", "data_seed", "transforms"):
        return task[key]
    if key in config["run"]:
        return config["run"][key]
    if key in config["train"]:
        return config["train"][key]
    bare = key.split(".", 1)[1] if key.startswith(("arch.", "data.")) else key
    if not key.startswith("data.") and bare in model["kwargs"]:
        return model["kwargs"][bare]
    if not key.startswith("arch.") and bare in task["options"]:
        return task["options"][bare]
    try:  # unset: the model's / dataset's default
        from zoo.registry import MODELS, constructor_options

        opts = constructor_options(MODELS.get(model["name"].split(".")[0]))
        if bare in opts and not key.startswith("data."):
            return opts[bare]
        from zoo.datasets import get_spec

        return dict(get_spec(task["dataset"]).options).get(bare)
    except (ValueError, KeyError):
        return None


def _norm(v: Any) -> Any:
    if isinstance(v, str):
        return normalize_name(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _metric_values(rec: Dict[str, Any], metric: str) -> List[Tuple[Any, Optional[float]]]:
    """``[(column override or None, value)]`` for one record."""
    m = rec["metrics"]
    if metric == "pruned":
        return [(int(k), v) for k, v in (m.get("pruned") or {}).items()]
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
    #: the resolved config of the cell's first run, to read keys other than rows/columns (zoo.bench.report)
    config: Optional[Dict[str, Any]] = field(default=None, repr=False, compare=False)
    #: the runs' metric values (scaled as the summary; None: a run without the metric), for per-run checks
    values: List[Optional[float]] = field(default_factory=list, repr=False, compare=False)

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


def _find_reported(reported: Optional[Dict[str, Any]], config: Dict[str, Any], layout: Dict[str, Any],
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
            have = column if (layout["metric"] == "pruned" and k == "layer") else cell_value(config, k)
            if _norm(have) != _norm(v):
                ok = False
                break
        if ok:
            return e
    return None


def aggregate(suite_info: Dict[str, Any], recs: Sequence[Dict[str, Any]]) -> Board:
    layout = suite_info["leaderboard"]
    scale = float(layout.get("scale", 100.0)) if layout["metric"] in ("train", "val", "test", "pruned") else 1.0
    buckets: Dict[Tuple[Any, Tuple[Any, ...], Any], Dict[str, Any]] = {}
    recs = [r for r in recs if not records.is_failed(r)]  # failed runs have no metrics (re-run retries them)
    for rec in recs:
        cfg = rec["config"]
        table = cell_value(cfg, layout["table_by"]) if layout.get("table_by") else ""
        row = tuple(cell_value(cfg, k) for k in layout["rows"])
        for col_override, value in _metric_values(rec, layout["metric"]):
            col = col_override if col_override is not None else cell_value(cfg, layout["columns"])
            b = buckets.setdefault((table, row, col), {"values": [], "epochs": [], "diverged": 0, "config": cfg})
            b["values"].append(None if value is None else float(value) * scale)
            b["epochs"].append(rec.get("epochs_to_best"))
            b["diverged"] += int(bool(rec.get("diverged")))
    entries = []
    stat = summarize_log if layout["metric"] in LOG_METRICS else summarize
    for (table, row, col), b in buckets.items():
        entries.append(Entry(table, row, col, stat(b["values"]), summarize(b["epochs"]), b["diverged"],
                             _find_reported(suite_info.get("reported"), b["config"], layout, col), b["config"],
                             b["values"]))
    entries.sort(key=lambda e: (str(e.table), tuple(map(str, e.row)), _sort_key(e.column)))
    first = recs[0] if recs else {}
    prov = {"commits": sorted({r.get("commit", "?") for r in recs}), "devices": sorted({r.get("device", "?") for r in recs}),
            "versions": first.get("versions", {})}
    from zoo.bench.suite import describe_settings

    return Board(suite_info["name"], suite_info.get("meta", {}), layout, entries, prov, runs=len(recs),
                 reduced=describe_settings(suite_info))


def _sort_key(v: Any) -> Tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) else (1, str(v))


def read_folder(results: PathLike) -> Tuple[Path, Dict[str, Any], List[Dict[str, Any]], Dict[str, int]]:
    """``(folder, resolved suite, kept records, dropped counts)`` of one results folder.

    Only records whose ``id`` is a cell of the folder's resolved suite are kept; a second record
    with an id already seen (a duplicated line, a re-imported log) and failed runs are dropped.
    """
    results = Path(results)
    if not results.exists():
        raise FileNotFoundError(f"results folder {results} does not exist; pass a folder written by `zoo bench`")
    folder = results if results.is_dir() else results.parent
    info = records.read_resolved(folder)
    if info is None:
        raise FileNotFoundError(f"{folder} has no {records.RESOLVED_FILE}; pass a folder written by `zoo bench`")
    log = folder / records.RESULTS_FILE
    suite_ids = {c["id"] for c in info["cells"]}
    kept: List[Dict[str, Any]] = []
    seen = set()
    dropped = {"duplicate": 0, "not_in_suite": 0, "failed": 0}
    for number, rec in records.iter_numbered(log):
        if records.is_failed(rec):  # no metrics; not finished, so a re-run retries it (docs/distributed.md)
            dropped["failed"] += 1
            continue
        if rec["id"] not in suite_ids:
            dropped["not_in_suite"] += 1
            continue
        if rec["id"] in seen:
            dropped["duplicate"] += 1
            continue
        missing = [k for k in ("config", "metrics") if not isinstance(rec.get(k), dict)]
        if missing:
            raise records.CorruptRecordsError(f"{log}:{number}: record {rec['id']} has no {' or '.join(map(repr, missing))} "
                                              "object; a run record written by `zoo bench` always has both")
        seen.add(rec["id"])
        kept.append(rec)
    return folder, info, kept, {k: v for k, v in dropped.items() if v}


def load_board(results: PathLike) -> Board:
    """Aggregate one results folder (``results.jsonl`` + ``suite.resolved.json``).

    Only records whose ``id`` is a cell of the folder's resolved suite count; a second record
    with an id already seen (a duplicated line, a re-imported log) is dropped.  How many were
    left out is in ``Board.dropped`` and printed under the tables.
    """
    folder, info, kept, dropped = read_folder(results)
    board = aggregate(info, kept)
    board.dropped = dropped
    skipped = folder / "skipped.json"
    if skipped.is_file():
        try:
            board.skipped = json.loads(skipped.read_text())
        except ValueError as e:
            raise records.CorruptRecordsError(f"{skipped} is corrupt ({e}); delete it (the next run rewrites it)") from None
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
            # the interval that decides a status (zoo.bench.report.cell_status): the 95 % CI of the
            # geometric mean, mean ×/÷ 10^ci95 — printed so that every status can be checked here
            text += f", 95 % CI {s.mean / 10 ** s.ci95:.1e} … {s.mean * 10 ** s.ci95:.1e}"
        return text
    if s.ci95 is None:
        return f"{s.mean:.{digits}f} (n={s.n})"
    return f"{s.mean:.{digits}f} ± {s.ci95:.{digits}f} ({s.n})"


def is_log_metric(board: Board) -> bool:
    return board.layout["metric"] in LOG_METRICS


def fmt_paper(board: Board, value: Any) -> str:
    return f"{float(value):.2e}" if is_log_metric(board) else f"{float(value):.2f}"


def fmt_diff(board: Board, diff: Optional[float]) -> str:
    return "" if diff is None else f"{diff:+.2f}"


def diff_label(board: Board) -> str:
    return "Δlog10" if is_log_metric(board) else "Δ"


def metric_description(board: Board) -> str:
    """One line: what a cell shows (geometric vs arithmetic) and, when the board has reported
    numbers, what the paper/Δ columns mean."""
    lay = board.layout
    with_paper = any(e.reported is not None for e in board.entries)
    if is_log_metric(board):
        text = (f"Metric: **{lay['metric']}** (absolute value, not a percentage), geometric mean [min … max] "
                "over runs (n)")
        return text + ("; `paper` is the reported number; `Δlog10` = log10(ours) − log10(paper), in decades."
                       if with_paper else ".")
    text = (f"Metric: **{lay['metric']}**" + (" (%)" if lay["metric"] in ("train", "val", "test", "pruned") else "")
            + ", mean ± 95% CI (Student t) over runs, (n) runs")
    return text + ("; `paper` is the reported number, `Δ` = ours − paper." if with_paper else ".")


def has_reported(t: Dict[str, Any]) -> bool:
    """Whether any cell of table ``t`` (from :func:`tables`) has a reported number."""
    return any(e.reported is not None for cols in t["rows"].values() for e in cols.values())


def notes(board: Board) -> List[str]:
    """The suite's ``notes`` (a string or a list of strings), after the reduced protocol if any."""
    raw = board.meta.get("notes") or []
    reduced = [f"Reduced protocol (zoo bench --set): {board.reduced}; not the suite's full protocol."] \
        if board.reduced else []
    return reduced + ([raw] if isinstance(raw, str) else [str(n) for n in raw])


def tables(board: Board) -> Dict[Any, Dict[str, Any]]:
    """``{table: {"columns": [...], "rows": {row: {col: Entry}}}}``."""
    out: Dict[Any, Dict[str, Any]] = {}
    for e in board.entries:
        t = out.setdefault(e.table, {"columns": [], "rows": {}})
        if e.column not in t["columns"]:
            t["columns"].append(e.column)
        t["rows"].setdefault(e.row, {})[e.column] = e
    for t in out.values():
        t["columns"].sort(key=_sort_key)
    return out


def to_markdown(board: Board) -> str:
    lay = board.layout
    lines = [f"# {board.meta.get('title') or board.suite}", ""]
    if board.meta.get("paper"):
        lines.append(f"Paper: {board.meta['paper']}" + (f" — {', '.join(board.meta['tables'])}" if board.meta.get("tables") else ""))
    lines += [metric_description(board),
              f"Provenance: commit {', '.join(board.provenance['commits'])}; device {', '.join(board.provenance['devices'])}; "
              + ", ".join(f"{k} {v}" for k, v in board.provenance.get("versions", {}).items()), ""]
    for note in notes(board):
        lines += [f"> **Note.** {note}", ""]
    for table, t in tables(board).items():
        lines.append(f"## {lay.get('table_by', '')} = {table}" if lay.get("table_by") else "## results")
        paper_cols = has_reported(t)
        head = [*lay["rows"]]
        for c in t["columns"]:
            head += [f"{lay['columns']}={c}"] + (["paper", diff_label(board)] if paper_cols else [])
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for row, cols in t["rows"].items():
            cells = [str(v) for v in row]
            for c in t["columns"]:
                e = cols.get(c)
                if e is None:
                    cells += [""] * (3 if paper_cols else 1)
                    continue
                mark = f" ⚠{e.diverged} diverged" if e.diverged else ""
                cells.append(fmt(e.summary) + mark)
                if paper_cols:
                    cells.append(fmt_paper(board, e.reported["value"]) if e.reported else "")
                    cells.append(fmt_diff(board, e.diff))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if board.dropped:
        lines += [f"Note: {dropped_note(board)}.", ""]
    if board.skipped:
        lines += [f"Skipped {len(board.skipped)} cell(s):", ""]
        reasons = sorted(set(board.skipped.values()))
        lines += [f"- {r}" for r in reasons[:20]] + [""]
    return "\n".join(lines)


def to_rows(board: Board) -> List[Dict[str, Any]]:
    rows = []
    for e in board.entries:
        r: Dict[str, Any] = {"suite": board.suite, "table": e.table}
        r.update({k: v for k, v in zip(board.layout["rows"], e.row)})
        r.update({"column": board.layout["columns"], "column_value": e.column, "metric": board.layout["metric"],
                  "n": e.summary.n, "mean": e.summary.mean, "std": e.summary.std, "ci95": e.summary.ci95,
                  "aggregate": e.summary.kind, "min": e.summary.low, "max": e.summary.high,
                  "median": e.summary.median,
                  "epochs_to_best_mean": e.epochs.mean, "epochs_to_best_ci95": e.epochs.ci95, "diverged": e.diverged,
                  "paper": e.reported["value"] if e.reported else None,
                  "paper_ci95": e.reported.get("ci95") if e.reported else None,
                  "paper_table": e.reported["table"] if e.reported else None, "diff": e.diff})
        rows.append(r)
    return rows


def to_csv(boards: Sequence[Board]) -> str:
    rows = [r for b in boards for r in to_rows(b)]
    keys: List[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_leaderboard(results: Sequence[PathLike], out: PathLike) -> Dict[str, Path]:
    """Write ``leaderboard.md``, ``.csv``, ``.json`` and ``index.html`` for ``results`` folders into ``out``."""
    from zoo.bench.html import to_html
    from zoo.bench.runner import write_atomic

    boards = [load_board(r) for r in results]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "leaderboard.md", "csv": out / "leaderboard.csv", "json": out / "leaderboard.json",
             "html": out / "index.html"}
    write_atomic(paths["md"], "\n\n".join(to_markdown(b) for b in boards))
    write_atomic(paths["csv"], to_csv(boards))
    write_atomic(paths["json"], json.dumps([{"suite": b.suite, "meta": b.meta, "layout": b.layout,
                                             "provenance": b.provenance, "runs": b.runs, "skipped": b.skipped,
                                             "dropped": b.dropped,
                                             "entries": to_rows(b)} for b in boards], indent=1, default=str,
                                           allow_nan=False))
    write_atomic(paths["html"], to_html(boards))
    return paths


def _finite(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x)
