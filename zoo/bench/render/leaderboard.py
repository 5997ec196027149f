"""A leaderboard as text: Markdown tables, CSV rows and the JSON document (strings only; no IO)."""
from __future__ import annotations

import csv
import io
import json
from typing import Any, Dict, List, Sequence

from zoo.bench.suite.measures import metric_spec
from zoo.bench.suite.search_space import describe_point
from zoo.bench.analyze.board import (Board, Entry, diff_label, dropped_note, fmt, fmt_diff, fmt_paper, graph_states_text,
                                     is_log_metric, tables)


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
    text = (f"Metric: **{lay['metric']}**" + (" (%)" if metric_spec(lay["metric"]).percent else "")
            + ", mean ± 95% CI (Student t) over runs, (n) runs")
    return text + ("; `paper` is the reported number, `Δ` = ours − paper." if with_paper else ".")


def search_description(board: Board) -> str:
    """One line on a searched board (``[search]``): how each cell's point was chosen; ``""`` without a search."""
    choices = [e.search for e in board.entries if e.search is not None]
    if not choices:
        return ""
    partial = sum(c.partial for c in choices)
    return (f"Hyper-parameter search: each searched cell shows the runs of its best search point, chosen by the best "
            f"mean **{choices[0].metric}** accuracy over seeds (over the seeds every recorded point has), as "
            f"'best of N: point'; {len(choices) - partial} of {len(choices)} searched cells have every point recorded"
            + (f", {partial} are a **partial search** (points not run: not the paper's protocol)." if partial else "."))


def ours_text(entry: Entry, diverged: bool = True) -> str:
    """A cell's own number as the tables print it: summary, divergences (``diverged``), the chosen search point."""
    text = fmt(entry.summary) + (f" ⚠{entry.diverged} diverged" if diverged and entry.diverged else "")
    if entry.search is not None:
        text += f" — {entry.search.describe()}"
    return text


def has_reported(t: Dict[str, Any]) -> bool:
    """Whether any cell of table ``t`` (from :func:`tables`) has a reported number."""
    return any(e.reported is not None for cols in t["rows"].values() for e in cols.values())


def notes(board: Board) -> List[str]:
    """The suite's ``notes`` (a string or a list of strings), after the reduced protocol if any."""
    raw = board.meta.get("notes") or []
    reduced = [f"Reduced protocol (zoo bench --set): {board.reduced}; not the suite's full protocol."] \
        if board.reduced else []
    return reduced + ([raw] if isinstance(raw, str) else [str(n) for n in raw])


def to_markdown(board: Board) -> str:
    lay = board.layout
    lines = [f"# {board.meta.get('title') or board.suite}", ""]
    if board.meta.get("paper"):
        lines.append(f"Paper: {board.meta['paper']}" + (f" — {', '.join(board.meta['tables'])}" if board.meta.get("tables") else ""))
    lines += [metric_description(board), *([search_description(board)] if search_description(board) else []),
              f"Provenance: commit {', '.join(board.provenance['commits'])}; device {', '.join(board.provenance['devices'])}; "
              + ", ".join(f"{k} {v}" for k, v in board.provenance.get("versions", {}).items())
              + graph_states_text(board.provenance.get("cuda_graphs", {})), ""]
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
                cells.append(ours_text(e))
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
        if e.search is not None:  # only searched cells: other suites' rows stay as they were
            r.update({"search_point": describe_point(e.search.point), "search_metric": e.search.metric,
                      "search_score": e.search.score, "search_points": e.search.points,
                      "search_recorded": e.search.recorded, "search_partial": e.search.partial,
                      "search_seeds": list(e.search.seeds)})
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


def to_json(boards: Sequence[Board]) -> str:
    """The leaderboard as one JSON document (a list with one object per suite)."""
    return json.dumps([{"suite": b.suite, "meta": b.meta, "layout": b.layout,
                        "provenance": b.provenance, "runs": b.runs, "skipped": b.skipped,
                        "dropped": b.dropped,
                        "entries": to_rows(b)} for b in boards], indent=1, default=str,
                      allow_nan=False)
