"""A static, self-contained leaderboard page: sortable tables, anchors, inline SVG plots.

No external assets: plots are matplotlib SVG inlined into the page, and sorting is a few
lines of inline JavaScript (click a column header).
"""
from __future__ import annotations

import html
import io
import re
from typing import Any, Dict, List, Sequence

from zoo.bench.suite.measures import metric_spec
from zoo.bench.suite.papers import cite
from zoo.bench.analyze.board import Board, diff_label, fmt, fmt_diff, fmt_paper, tables
from zoo.bench.render.leaderboard import has_reported, metric_description, notes

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3;cursor:pointer;position:sticky;top:0}
td.k{text-align:left;font-family:monospace}
.pos{color:#1a7f37}.neg{color:#b42318}.muted{color:#888}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plots svg{max-width:640px;height:auto}
nav a{margin-right:1em} h2 a,h3 a{text-decoration:none;color:inherit}
"""

_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){
 var t=th.closest('table'),b=t.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th);
 var asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
 var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){
  var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent;
  var fa=parseFloat(a),fc=parseFloat(c);var r=(!isNaN(fa)&&!isNaN(fc))?fa-fc:a.localeCompare(c);return asc?r:-r;});
 rows.forEach(function(r){b.appendChild(r);});});});
"""


def _code(text: str) -> str:
    """Escaped text with Markdown's `code` spans as <code> (the shared descriptions are Markdown)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def slug(*parts: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(str(p) for p in parts).lower()).strip("-")


#: Fixed SVG ids and no date: the same data give the same bytes (the page is committed and diffed).
_SVG_RC = {"svg.hashsalt": "gat-zoo", "svg.fonttype": "none"}  # text as <text>: smaller, searchable


def _plot(board: Board, table: Any, t: Dict[str, Any], what: str) -> str:
    """One SVG plot of ``table``: the metric (with the paper's numbers overlaid) or epochs to best."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    metric = metric_spec(board.layout["metric"])
    with matplotlib.rc_context(_SVG_RC):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        numeric = all(isinstance(c, (int, float)) for c in t["columns"])
        any_paper = False
        for row, cols in t["rows"].items():
            xs, ys, lo, hi, px, py = [], [], [], [], [], []
            for i, c in enumerate(t["columns"]):
                e = cols.get(c)
                if e is not None and what == "metric" and e.reported is not None:
                    px.append(c if numeric else i)
                    py.append(float(e.reported["value"]))
                s = None if e is None else (e.summary if what == "metric" else e.epochs)
                if s is None or s.mean is None:
                    continue
                xs.append(c if numeric else i)
                ys.append(s.mean)
                if s.kind == "geometric":  # the min–max range over seeds
                    lo.append(s.mean - (s.low if s.low is not None else s.mean))
                    hi.append((s.high if s.high is not None else s.mean) - s.mean)
                else:
                    # epochs to best cannot be negative: the lower whisker stops at 0
                    lo.append(min(s.ci95 or 0.0, s.mean) if what == "epochs" else s.ci95 or 0.0)
                    hi.append(s.ci95 or 0.0)
            color = None
            if xs:
                bars = ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label="/".join(map(str, row)))
                color = bars.lines[0].get_color()
            if px:  # the paper's numbers: same colour as the row, hollow diamonds, no line
                ax.plot(px, py, linestyle="none", marker="D", markersize=7, markerfacecolor="none",
                        markeredgewidth=1.5, color=color)
                any_paper = True
        log_x = numeric and len(t["columns"]) > 1 and min(t["columns"]) > 0 and (
            metric.geometric and what == "metric"
            or len(t["columns"]) > 2 and max(t["columns"]) / max(min(t["columns"]), 1) > 8)
        if log_x:
            ax.set_xscale("log", base=2)
        if numeric:  # ticks at the measured depths, not at fractional positions
            ax.set_xticks(list(t["columns"]), [str(c) for c in t["columns"]])
            ax.minorticks_off()
        else:
            ax.set_xticks(range(len(t["columns"])), [str(c) for c in t["columns"]])
        energy = metric.geometric and what == "metric"
        if energy:
            ax.set_yscale("log")
        ax.set_xlabel(board.layout["columns"])
        ax.set_ylabel(board.layout["metric"] if what == "metric" else "epochs to best")
        title = "energy" if energy else ("accuracy" if what == "metric" else "epochs to best")
        ax.set_title(f"{table}: {title} vs {board.layout['columns']}", fontsize=10)
        ax.grid(alpha=.3)
        handles, labels = ax.get_legend_handles_labels()
        if any_paper:
            handles.append(Line2D([], [], linestyle="none", marker="D", markersize=7, markerfacecolor="none",
                                  markeredgewidth=1.5, color="0.2"))
            labels.append("paper")
        if handles:
            ax.legend(handles, labels, fontsize=7)
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]


def plots(board: Board, table: Any, t: Dict[str, Any]) -> str:
    """The plots of one leaderboard table (none for a single column: the table shows it all)."""
    if len(t["columns"]) < 2:
        return ""
    return ('<div class="plots">' + _plot(board, table, t, "metric")
            + (_plot(board, table, t, "epochs") if metric_spec(board.layout["metric"]).selected else "")
            + "</div>")


def page(title: str, body: str, nav: str = "") -> str:
    """A self-contained HTML page (inline CSS and sorting script)."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"
            + (f"<nav>{nav}</nav>" if nav else "") + body + f"<script>{_JS}</script></body></html>")


def _board_html(board: Board) -> List[str]:
    lay = board.layout
    sid = slug(board.suite)
    out = [f'<h2 id="{sid}"><a href="#{sid}">{html.escape(board.meta.get("title") or board.suite)}</a></h2>']
    if board.meta.get("paper"):
        out.append(f"<p>Paper: {html.escape(cite(str(board.meta['paper'])))} "
                   f"{html.escape(', '.join(board.meta.get('tables') or []))}</p>")
    desc = metric_description(board).replace("**", "")
    out.append(f"<p class=muted>{board.runs} runs. {_code(desc)} Commit "
               f"{html.escape(', '.join(board.provenance['commits']))}; device "
               f"{html.escape(', '.join(board.provenance['devices']))}; "
               + html.escape(", ".join(f"{k} {v}" for k, v in board.provenance.get("versions", {}).items())) + "</p>")
    for note in notes(board):
        out.append(f"<p><b>Note.</b> {_code(note)}</p>")
    for table, t in tables(board).items():
        tid = slug(board.suite, table)
        paper_cols = has_reported(t)
        out.append(f'<h3 id="{tid}"><a href="#{tid}">{html.escape(str(lay.get("table_by", "")))} = '
                   f"{html.escape(str(table))}</a></h3>")
        head = "".join(f"<th>{html.escape(k)}</th>" for k in lay["rows"])
        for c in t["columns"]:
            head += f"<th>{html.escape(str(lay['columns']))}={html.escape(str(c))}</th>"
            head += f"<th>paper</th><th>{diff_label(board)}</th>" if paper_cols else ""
            head += (f"<th title='mean epoch at which the selected (best) model was reached'>epochs to best"
                     f"<br>({html.escape(str(lay['columns']))}={html.escape(str(c))})</th>")
        out.append(f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>')
        for row, cols in t["rows"].items():
            tds = "".join(f'<td class="k">{html.escape(str(v))}</td>' for v in row)
            for c in t["columns"]:
                e = cols.get(c)
                if e is None:
                    tds += "<td></td>" * (4 if paper_cols else 2)
                    continue
                v = "" if e.summary.mean is None else f"{e.summary.mean:.6g}"
                warn = f" <span class=neg title='diverged runs'>⚠{e.diverged}</span>" if e.diverged else ""
                tds += f'<td data-v="{v}">{html.escape(fmt(e.summary))}{warn}</td>'
                if paper_cols:
                    title = html.escape(str(e.reported.get("table", ""))) if e.reported else ""
                    tds += f"<td title='{title}'>{fmt_paper(board, e.reported['value']) if e.reported else ''}</td>"
                    if e.diff is None:
                        tds += "<td></td>"
                    else:
                        tds += (f'<td data-v="{e.diff:.6g}" class="{"pos" if e.diff >= 0 else "neg"}">'
                                f"{fmt_diff(board, e.diff)}</td>")
                ep = "" if e.epochs.mean is None else f"{e.epochs.mean:.0f}"
                tds += f'<td data-v="{ep}">{ep}</td>'
            out.append(f"<tr>{tds}</tr>")
        out.append("</tbody></table>")
        out.append(plots(board, table, t))
    if board.skipped:
        out.append(f"<p class=muted>Skipped {len(board.skipped)} cell(s): "
                   + html.escape("; ".join(sorted(set(board.skipped.values()))[:10])) + "</p>")
    return out


def to_html(boards: Sequence[Board]) -> str:
    nav = " ".join(f'<a href="#{slug(b.suite)}">{html.escape(b.suite)}</a>' for b in boards)
    body: List[str] = []
    for b in boards:
        body += _board_html(b)
    return page("gat-zoo leaderboard", "\n".join(body), nav)
