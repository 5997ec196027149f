"""Markdown and HTML for paper cells without records: each one's estimated cost and class, and the
``zoo bench`` commands that would fill a suite's missing cells (no IO)."""
from __future__ import annotations

import html as h
import shlex
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.analyze.board import KEY_META
from zoo.bench.report.missing_cost import DATA_ABSENT, NEEDS_GPU, NO_CELL, RUNS_HERE, FillCommand, MissingCell
from zoo.bench.plan.cost_file import provisional
from zoo.bench.plan.estimate import RUNS_HERE_CPU_HOURS, format_value, hours


def describe_entry(entry: Mapping[str, Any]) -> str:
    """``dataset=citeseer, num_layers=5`` (the paper cell's keys)."""
    return ", ".join(f"{k}={format_value(v)}" for k, v in entry.items() if k not in KEY_META)


def totals(missing: Sequence[MissingCell]) -> Dict[str, Dict[str, float]]:
    """``{class: {"cells": n, "runs": r, "seconds": s, "gpu_seconds": g}}`` (a suite cell shared by
    paper cells once; ``gpu_seconds``: by the ``cuda`` cost model)."""
    out: Dict[str, Dict[str, float]] = {c: {"cells": 0, "runs": 0, "seconds": 0.0, "gpu_seconds": 0.0}
                                        for c in (RUNS_HERE, NEEDS_GPU, DATA_ABSENT, NO_CELL)}
    seen: Dict[str, float] = {}
    for m in missing:
        t = out[m.cls]
        t["cells"] += 1
        for cid, s in m.cell_seconds.items():
            if cid not in seen:
                seen[cid] = s
                t["runs"] += 1
                t["seconds"] += s
                t["gpu_seconds"] += m.cell_gpu_seconds.get(cid, 0.0)
    return out


def totals_line(missing: Sequence[MissingCell]) -> str:
    t = totals(missing)
    marked = " by a provisional estimate" if provisional("cuda") else ""
    return (f"{t[RUNS_HERE]['cells']:.0f} *runs here* (≤ {RUNS_HERE_CPU_HOURS:g} CPU-hours each; "
            f"{t[RUNS_HERE]['runs']:.0f} runs, ≈ {t[RUNS_HERE]['seconds'] / 3600:,.0f} CPU-hours), "
            f"{t[NEEDS_GPU]['cells']:.0f} *need a GPU* ({t[NEEDS_GPU]['runs']:.0f} runs, "
            f"≈ {t[NEEDS_GPU]['gpu_seconds'] / 3600:,.1f} GPU-hours{marked}; "
            f"≈ {t[NEEDS_GPU]['seconds'] / 3600:,.0f} CPU-hours){_absent_clause(missing, t[DATA_ABSENT])}"
            f"{_no_cell_clause(t[NO_CELL])}")


def _absent_clause(missing: Sequence[MissingCell], t: Mapping[str, float]) -> str:
    """``, N *data absent here* (...)``: the cells whose raw data the records' machine's mirror lacks, with
    why; ``""`` if none."""
    if not t["cells"]:
        return ""
    why = "; ".join(dict.fromkeys(m.absent for m in missing if m.absent))
    return (f", {t['cells']:.0f} *data absent here* ({t['runs']:.0f} runs, ≈ {t['seconds'] / 3600:,.0f} CPU-hours; "
            f"{why})")


def _no_cell_clause(t: Mapping[str, float]) -> str:
    """``, N with *no cell of the suite*``: paper cells nothing in the suite would run (no cost, no runs),
    counted apart from *runs here*; ``""`` if none."""
    return f", {t['cells']:.0f} with *{NO_CELL}*" if t["cells"] else ""


def _costs(m: MissingCell) -> Tuple[str, str]:
    """A paper cell's CPU and GPU time as the table shows them: ``–`` where it has no cell to run."""
    if m.cls == NO_CELL:
        return "–", "–"
    return hours(m.seconds), _gpu_time(m.gpu_seconds)


def _class(c: FillCommand) -> str:
    return f"{c.cls} ({c.absent})" if c.absent else c.cls


def gpu_caveat() -> str:
    """The sentence saying why the GPU times are not yet a price (the ``cuda`` entry's ``provisional``), or ``""``."""
    why = provisional("cuda")
    return f"The GPU times come from the cost model's `cuda` entry, {why}." if why else ""


def _gpu_time(seconds: Any) -> str:
    return "–" if seconds is None else hours(seconds)


def command_line(c: FillCommand) -> str:
    """A fill command with its runs and estimated time: CPU time, and for *needs a GPU* its GPU time."""
    gpu = f", ≈ {hours(c.gpu_seconds)} on one GPU" if c.cls == NEEDS_GPU and c.gpu_seconds is not None else ""
    return f"{c.command()}   # {c.runs} runs, ≈ {hours(c.seconds)} CPU, {_class(c)}{gpu}"


def missing_markdown(suite: str, missing: Sequence[MissingCell], commands: Sequence[FillCommand]) -> List[str]:
    """A suite's "cells not run" section: one row per paper cell, then the commands."""
    if not missing:
        return []
    lines = [f"### {suite}: paper cells not run — estimated cost", "",
             f"{totals_line(missing)}; estimated by the cost model fitted on the records' shared 2-core CPU "
             "(`zoo bench SUITE --estimate`), GPU time by its `cuda` entry, fitted on one H200's records "
             "(`--estimate --device cuda`).", "",
             "| paper table | cell | runs | CPU time | GPU time | class |", "|---|---|---|---|---|---|"]
    for m in sorted(missing, key=lambda m: (str(m.entry.get("table", "")), m.seconds, describe_entry(m.entry))):
        cpu, gpu = _costs(m)
        lines.append(f"| {m.entry.get('table', '')} | {describe_entry(m.entry)} | {len(m.cells)} | "
                     f"{cpu} | {gpu} | {m.cls} |")
    if commands:
        lines += ["", "Commands filling them (one slice each, cheapest first; add `--out` to run into a copy of the "
                      "records folder):", "", "```"]
        lines += [command_line(c) for c in commands]
        if any(c.cls == NEEDS_GPU for c in commands):
            lines += ["# on a cluster: the same with --executor ray [--gpus-per-group F], or --shard I/N per job"]
        lines.append("```")
    lines.append("")
    return lines


def missing_html(suite: str, missing: Sequence[MissingCell], commands: Sequence[FillCommand]) -> str:
    """The same as :func:`missing_markdown`, folded (``<details>``) under the suite's tables."""
    if not missing:
        return ""
    rows = "".join(
        f"<tr><td>{h.escape(str(m.entry.get('table', '')))}</td><td class=k>{h.escape(describe_entry(m.entry))}</td>"
        f"<td>{len(m.cells)}</td>{''.join(f'<td>{h.escape(t)}</td>' for t in _costs(m))}"
        f"<td>{h.escape(m.cls)}</td></tr>"
        for m in sorted(missing, key=lambda m: (str(m.entry.get("table", "")), m.seconds, describe_entry(m.entry))))
    cmds = "\n".join(command_line(c) for c in commands)
    return (f"<details><summary>{h.escape(suite)}: {len(missing)} paper cells not run — "
            f"{h.escape(totals_line(missing).replace('*', ''))}</summary>"
            '<table class="sortable"><thead><tr><th>paper table</th><th>cell</th><th>runs</th><th>CPU time</th>'
            f"<th>GPU time</th><th>class</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f"<pre>{h.escape(cmds)}</pre>" if cmds else "") + "</details>")


def todo_lines(commands: Sequence[FillCommand], out_root: Optional[str] = None) -> List[str]:
    """``zoo report --todo``: one line per command, cheapest first, with its paper cells, runs, estimated
    time and the running total.  Each line runs as it stands in a shell; ``out_root`` adds
    ``--out OUT_ROOT/<suite>`` (e.g. a checkout's records folder: the runner skips finished runs)."""
    lines, total = [], 0.0
    for c in commands:
        total += c.seconds
        out = f" --out {shlex.quote(f'{out_root}/{c.suite}')}" if out_root else ""
        gpu = f", ≈ {hours(c.gpu_seconds)} on one GPU" if c.cls == NEEDS_GPU and c.gpu_seconds is not None else ""
        lines.append(f"{c.command()}{out}   # {c.cells} paper cell(s), {c.runs} runs, ≈ {hours(c.seconds)} CPU "
                     f"(total {hours(total)}), {_class(c)}{gpu}")
    return lines
