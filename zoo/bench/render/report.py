"""The reproduction report as text: Markdown and a self-contained HTML page (strings only; no IO).

Where the records, notes and pages live is the caller's: :class:`ReportSources` (the CLI passes
this repository's layout) — the text names them, so the page says how to regenerate itself.
"""
from __future__ import annotations

import html as h
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from zoo.bench.analyze import board as lb
from zoo.bench.report import findings as fd
from zoo.bench.report import agreement as ag
from zoo.bench.report.notes import DIFFERS, OPEN, UNDERSPECIFIED, Note
from zoo.bench.report.status import (ALTERNATIVE, ALTERNATIVE_NOT_RUN, FINDING_COUNTS, MISSING_NOTE, NO_PAPER, NOISY,
                                      REPRODUCED, STATUSES, Report, Row, SuiteReport, finding_counts)
from zoo.bench.render.html import page, plots, slug
from zoo.bench.render.sources import ReportSources
from zoo.bench.render.missing import gpu_caveat, missing_html, missing_markdown, totals_line as missing_totals
from zoo.bench.render.leaderboard import metric_description, ours_text, search_description


def _display_path(path: Path, root: Path) -> str:
    """``path`` relative to the repository ``root`` (just its name outside it)."""
    try:
        return Path(os.path.relpath(path.resolve(), root)).as_posix() if path.resolve().is_relative_to(root) \
            else path.name
    except ValueError:
        return path.name


def _hours(seconds: float) -> str:
    return f"{seconds:.0f} s ({seconds / 3600:.2f} h)" if seconds >= 360 else f"{seconds:.0f} s"


def fmt_paper(board: lb.Board, reported: Mapping[str, Any]) -> str:
    text = lb.fmt_paper(board, reported["value"])
    digits = 2
    if reported.get("ci95") is not None:
        return f"{text} ± {float(reported['ci95']):.{digits}f}"
    if reported.get("std") is not None:
        return f"{text} (sd {float(reported['std']):.{digits}f})"
    if reported.get("spread") is not None:
        return f"{text} (± {float(reported['spread']):.{digits}f})"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machines(report: Report) -> List[str]:
    return sorted({str(r.get("device", "?")) for s in report.suites for r in s.records})


def rules_text() -> List[str]:
    """The status rules as the page states them, written from the constants the code applies."""
    pts, dec = ag.MARGINS["points"], ag.MARGINS["decades"]
    return [
        "- Each cell with a paper number gets the **95 % interval of ours − paper** (Welch's two-sample interval "
        "with Welch–Satterthwaite degrees of freedom; Welch 1947). The paper's run-to-run spread is read from what "
        "it stores: a 95 % CI over its n runs (sd = CI · √n / t), an sd, or an unnamed ± read as an sd (the widest "
        "reading); where it stores none, its runs are taken to spread as ours, and a paper number of one run (or "
        "of an unstated number of runs) is compared by the prediction interval of one new draw. Energies are "
        "compared in log10. Fewer than two runs of ours decide nothing.",
        f"- Equivalence margin (the smallest difference that counts): **±{pts:g} points** for accuracies and "
        f"other percentages, **±{dec:g} decade** (a factor {10 ** dec:.1f}) for energies. {pts:g} points is about "
        "one test node of the smallest test sets compared (Cornell, Texas: 37 nodes, 2.7 points a node) and well "
        "under the gaps the papers' claims rest on (5–70 points); the energy claims are growth or decay by 1–12 "
        "decades over depth.",
        f"- **{REPRODUCED}**: the whole interval lies within ± the margin (two one-sided tests, Schuirmann 1987; "
        "Lakens, Scheel & Isager 2018), even where it excludes 0.",
        f"- **{NOISY}**: the interval contains 0 but reaches past the margin; the status says how many runs of "
        "ours would decide it at the current mean and spread (or that none would: the paper's own uncertainty is "
        "wider than the margin).",
        f"- **{DIFFERS}** / **{OPEN}**: the interval excludes 0 and is not within the margin; the note gives the "
        "measured cause (explained) or what was tried (open).",
        f"- **{UNDERSPECIFIED}**: the paper does not define the protocol behind its number; the note lists what it "
        "leaves out and the measured sensitivity of our numbers to each choice. No run can settle such a cell; "
        "it is counted apart from open, whatever its numbers (the Δ column still shows them).",
        f"- **not run**: a paper number whose cell (the text's reading) has no record yet. `{NO_PAPER}`: our cell "
        "has no paper number.",
        f"- **{ALTERNATIVE}**: a cell beside a paper number that its suite does not declare as the text's reading "
        "(`readings` in the reported file, e.g. the nonlocal energy factors other than §4.1's 1/n): shown with its Δ, "
        "no status, not counted (run or not).",
    ]


def to_markdown(report: Report, sources: ReportSources) -> str:
    counts = report.counts()
    runs = sum(len(s.records) for s in report.suites)
    wall = sum(s.wall_time_s for s in report.suites)
    lines = ["# Reproduction report", "",
             f"<!-- Generated by `zoo report` from {sources.records} and {sources.notes};"
             " do not edit by hand. -->", "",
             f"Regenerate: `{sources.command}` (from the repository root); `zoo report --check` fails if this page is "
             f"out of date or an open row has no note. Records: `{sources.records}/<suite>/` (`zoo bench` output "
             f"folders); notes: `{sources.notes}`; the paper's numbers: "
             f"`{sources.reported}`.", "",
             "## Summary", "",
             "| " + " | ".join([*STATUSES, "not run"]) + " |", "|" + "---|" * (len(STATUSES) + 1),
             "| " + " | ".join(str(counts[k]) for k in (*STATUSES, "not run")) + " |", ""]
    fc = report.finding_counts()
    if sum(fc.values()):
        lines += ["Findings (the papers' claims about figures and tables, decided on our cells; "
                  "[rules](#findings-rules)):", "",
                  "| held | of them significant | contradicted | inconclusive | not run |", "|---|---|---|---|---|",
                  "| " + " | ".join(str(fc[k]) for k in FINDING_COUNTS) + " |", ""]
    if report.missing():
        lines += [f"Paper cells not run: {missing_totals(report.missing())}; each suite lists them with the "
                  f"`zoo bench ... --where ...` commands that would run them.{' ' + gpu_caveat() if gpu_caveat() else ''}",
                  ""]
    if report.unequal_runs():
        lines += [f"Cells with more runs than another compared cell of their table (⚑; a table's cells run the "
                  f"same seeds, so the others are due the same seeds): {len(report.unequal_runs())}.", ""]
    if counts["no paper number"]:
        lines += [f"Our cells without a paper number: {counts['no paper number']}.", ""]
    if counts[ALTERNATIVE] or counts[ALTERNATIVE_NOT_RUN]:
        lines += [f"Alternative readings (cells beside a paper number that the suite does not declare as the "
                  f"text's reading; shown with Δ, no status, not counted above, also not as *not run*): "
                  f"{counts[ALTERNATIVE]} run, {counts[ALTERNATIVE_NOT_RUN]} not run.", ""]
    lines += [f"Compute: {_hours(wall)} of run wall time (sum over the records' `wall_time_s`), {runs} runs in "
              f"{len(report.suites)} record folder(s). Machine(s): {', '.join(_machines(report)) or '(none)'}.", "",
              "Status rules:", "", *rules_text(), "", '<a id="findings-rules"></a>Findings rules '
              "(`zoo/bench/findings.py`):", "", *findings_rules_text(), ""]
    if report.suites:
        lines += ["| suite | scale | runs | compute | reproduced | too noisy | differs — explained | open | "
                  "underspecified | paper cells not run | findings held / contradicted / inconclusive / not run |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in report.suites:
            c = _suite_counts(s)
            lines.append(f"| [{s.board.suite}](#{_anchor(s.board.suite)}) | {s.scale.split(' — ')[0].strip('*')} | "
                         f"{len(s.records)} | {_hours(s.wall_time_s)} | "
                         + " | ".join(str(c[k]) for k in STATUSES)
                         + f" | {sum(s.not_run.values())} | {_finding_counts_text(s.findings)} |")
        lines.append("")
    for s in report.suites:
        lines += _suite_markdown(s, sources)
    if report.unrun:
        lines += ["## Suites not run yet", "", "| suite | paper tables | paper cells | findings |", "|---|---|---|---|"]
        for u in report.unrun:
            tables = ", ".join(f"{t} ({n})" for t, n in u["tables"].items()) or "(no paper numbers stored)"
            lines.append(f"| `{u['suite']}` | {_cell(tables)} | {u['cells']} | {len(u['findings'])} |")
        lines.append("")
        for u in report.unrun:
            if u["findings"]:
                lines += [f"### {u['suite']}: findings (not run)", "", *_findings_markdown(u["findings"], u["layout"])]
            lines += missing_markdown(u["suite"], u.get("missing", []), u.get("fill", []))
    return "\n".join(lines)


def findings_rules_text() -> List[str]:
    return [
        "- A finding quotes the paper and states a check on our cells: greater / less (a vs b), at_least / at_most "
        "(a bound; \"in every run\": each run must meet it, else contradicted), increasing / decreasing (each step "
        "over the columns), bounded (max − min over the columns), made per column value (and per table); energies "
        "in log10.",
        f"- Each comparison: **{fd.HOLDS_SIG}** when it holds for the whole 95 % CIs (they do not overlap; a bound "
        f"outside the CI); **{fd.HOLDS}** when the means satisfy it; **{fd.CONTRADICTED}** when the opposite holds "
        f"significantly; **{fd.INCONCLUSIVE}** otherwise (n = 1 has no CI: never significant); **{fd.NOT_RUN}** "
        "without records.",
        "- A finding: contradicted if any comparison is; held (significant) if all that ran are; held if all that "
        "ran hold; else inconclusive; not run if none ran. A contradicted finding needs a note "
        '(`finding = "<id>"` in notes.toml). "The paper\'s own numbers": the same check on the paper\'s stored '
        "table numbers, where it has them.",
    ]


def _finding_counts_text(results: Sequence[fd.Result]) -> str:
    c = finding_counts(results)
    return " / ".join(str(c[k]) for k in ("held", "contradicted", "inconclusive", "not run")) if results else "–"


def _finding_verdict(r: fd.Result) -> str:
    if r.verdict == fd.CONTRADICTED and r.note is not None and r.note.status == DIFFERS:
        return f"{fd.CONTRADICTED} — explained"
    return r.verdict


def _finding_note(r: fd.Result) -> str:
    if r.note is not None:
        return f"({'differs' if r.note.status == DIFFERS else 'open'}) {r.note.text}"
    return MISSING_NOTE if r.verdict == fd.CONTRADICTED else ""


def _paper_text(r: fd.Result) -> str:
    if r.paper is None:
        return ""
    text = f"{r.paper} ({r.paper_ran} comparison{'s' if r.paper_ran != 1 else ''} on its stored numbers"
    odd = [c for c in r.paper_comparisons if c.verdict not in (fd.HOLDS, fd.HOLDS_SIG)]
    if odd and r.paper != fd.HOLDS_SIG:
        text += "; not holding: " + "; ".join(f"{c.label}: {c.text} — {c.verdict}" for c in odd[:5]) \
            + (f"; and {len(odd) - 5} more" if len(odd) > 5 else "")
    return text + ")"


def _findings_markdown(results: Sequence[fd.Result], layout: Mapping[str, Any]) -> List[str]:
    lines: List[str] = []
    for r in results:
        f = r.finding
        lines += [f"**`{f.id}` — {_finding_verdict(r)}.** {f.claim}", "",
                  f"> “{f.quote}” — {f.source}", "",
                  f"- Check: {fd.describe(f, layout)}."]
        ran = [c for c in r.comparisons if c.verdict != fd.NOT_RUN]
        if not ran:
            lines.append(f"- Ours: not run (none of its {len(r.comparisons)} comparisons has records).")
        else:
            lines.append(f"- Ours ({len(ran)} of {len(r.comparisons)} comparisons run):")
            lines += [f"  - {c.label}: {c.text} — {c.verdict}" for c in ran]
        if r.paper is not None:
            lines.append(f"- The paper's own numbers: {_paper_text(r)}.")
        if _finding_note(r):
            lines.append(f"- Note: {_finding_note(r)}")
        lines.append("")
    return lines


def _anchor(suite: str) -> str:  # GitHub's heading anchor of "## <suite>"
    return suite.lower()


def _suite_counts(s: SuiteReport) -> Dict[str, int]:
    c = {k: 0 for k in (*STATUSES, NO_PAPER, ALTERNATIVE)}
    for rows in s.rows.values():
        for r in rows:
            c[r.status] += 1
    return c


def _note_text(r: Row) -> str:
    if r.note is not None:
        return note_body(r.note)
    return MISSING_NOTE if r.status == OPEN else r.explanation


def note_body(note: Note) -> str:
    """A note as printed: its text, and for an *underspecified* one what the paper leaves out."""
    if not note.leaves_out:
        return note.text
    parts = "; ".join(f"({i}) {choice} — {sensitivity}" for i, (choice, sensitivity) in enumerate(note.leaves_out, 1))
    return f"{note.text} The paper leaves out (each with the measured sensitivity of our numbers): {parts}"


def delta_text(board: lb.Board, r: Row) -> str:
    """Δ and its 95 % interval (the numbers a status is decided on)."""
    a = r.agreement
    if a is None or a.delta != a.delta:  # no paper number; or no finite value of ours
        return lb.fmt_diff(board, r.entry.diff)
    if a.runs < 2:
        return f"{ag.signed(a.delta)} (one run)"
    return f"{ag.signed(a.delta)} {a.interval_text()}"


def status_text(r: Row) -> str:
    """The status, with the runs that would decide a cell too noisy to tell, and the flag of a cell
    with more runs than the rest of its table."""
    flag = f" ⚑ {r.entry.summary.n} runs, its table {r.table_runs}" if r.table_runs is not None else ""
    return _status_words(r) + flag


def _status_words(r: Row) -> str:
    a = r.agreement
    if r.status != NOISY or a is None:
        return r.status
    if a.runs < 2:
        return f"{NOISY} (one run: no spread of ours)"
    if a.seeds is None:
        return f"{NOISY} (no number of runs decides: the paper's own ± exceeds the margin)"
    return f"{NOISY} (≈ {a.seeds} runs would decide)"


def suite_notes(s: SuiteReport) -> Dict[str, int]:
    """The suite's notes as printed, numbered once per suite in the order the rows cite them."""
    numbered: Dict[str, int] = {}
    for rows in s.rows.values():
        for r in rows:
            text = _note_text(r)
            if text and text != MISSING_NOTE:
                numbered.setdefault(text, len(numbered) + 1)
    return numbered


def runs_line(reported: Any) -> str:
    """How the suite's paper numbers are read: the runs behind each, and where the paper says so
    (an entry's own ``runs`` overrides the file's: one clause per source)."""
    if not reported or not reported.get("entries"):
        return ""
    groups: Dict[Any, List[Mapping[str, Any]]] = {}  # (source, runs stated) -> the entries' runs, in file order
    for e in reported["entries"]:
        runs = (e["runs"] if "runs" in e else reported.get("runs")) or {}
        groups.setdefault((runs.get("source"), bool(runs.get("n"))), []).append(runs)
    if len(groups) == 1:
        return f"Paper's numbers: {_runs_clause(next(iter(groups.values())), each=True)}."
    return f"Paper's numbers, by the runs behind each: {'; '.join(_runs_clause(g) for g in groups.values())}."


def _runs_clause(group: Sequence[Mapping[str, Any]], each: bool = False) -> str:
    """``each the mean of 5 runs (source: “quote”)``, or ``6 the mean of 5 runs, 2 the mean of 3 runs
    (source; ...)`` for the runs statements of one source."""
    runs = group[0]
    if not runs.get("n"):
        why = runs.get("source") or "the reported file does not say"
        return f"{'each' if each else len(group)} read as one run, compared by a prediction interval ({why})"
    counts: Dict[int, int] = {}
    for r in group:
        counts[r["n"]] = counts.get(r["n"], 0) + 1
    quotes = {r.get("quote") for r in group}
    quote = "" if not runs.get("quote") else f": “{runs['quote']}”" if len(quotes) == 1 else \
        "; the statement behind each number is quoted in its entry of the reported file"
    if each and len(counts) == 1:
        return f"each the mean of {runs['n']} runs ({runs.get('source', '')}{quote})"
    return f"{', '.join(f'{c} the mean of {n} runs' for n, c in counts.items())} ({runs.get('source', '')}{quote})"


def _suite_markdown(s: SuiteReport, sources: ReportSources) -> List[str]:
    b, meta = s.board, s.board.meta
    commits = ", ".join(c[:7] for c in b.provenance["commits"])
    lines = [f"## {b.suite}", "", f"**{meta.get('title') or b.suite}**", ""]
    if meta.get("paper"):
        lines.append(f"Paper: {meta['paper']}" + (f" — {', '.join(meta['tables'])}" if meta.get("tables") else "")
                     + (f" (numbers: `benchmarks/suites/{meta['reported']}`)" if meta.get("reported") else "") + ".")
    if runs_line(s.info.get("reported")):
        lines += ["", runs_line(s.info.get("reported"))]
    if s.readings is not None:
        lines += ["", s.readings.summary()]
    lines += ["", f"Scale: {s.scale}", ""]
    if s.coverage():
        lines += [f"Paper's cells: {s.coverage()}.", ""]
    lines += [
              (f"Records: `{_display_path(s.folder, sources.root)}` — {len(s.records)} runs, {_hours(s.wall_time_s)} on "
               f"{', '.join(b.provenance['devices'])}; commit(s) {commits}; "
               + ", ".join(f"{k} {v}" for k, v in b.provenance.get("versions", {}).items())
               + lb.graph_states_text(b.provenance.get("cuda_graphs", {}))
               + f". Full leaderboard (CSV/JSON/HTML): `zoo leaderboard {_display_path(s.folder, sources.root)} --out DIR`."
               if s.records else f"Records: `{_display_path(s.folder, sources.root)}` — no finished run yet."), "",
              metric_description(b), ""]
    if search_description(b):
        lines += [search_description(b), ""]
    if b.dropped:
        lines += [f"Note: {lb.dropped_note(b)}.", ""]
    if s.reported_changed:
        lines += ["The paper's numbers were edited since these records were made; the current "
                  f"`benchmarks/suites/{meta.get('reported', 'reported/')}` is used.", ""]
    lay = b.layout
    head = [*lay["rows"], lay["columns"], "ours", "paper", f"{lb.diff_label(b)} [95 % interval]", "status", "note"]
    # A note usually covers many cells, and some span tables: numbered once per suite, printed once
    # under the first table citing it, cited by number everywhere.
    numbered, printed = suite_notes(s), set()
    for table, rows in s.rows.items():
        refs = sorted({r.ref for r in rows if r.ref})
        title = f"{lay['table_by']} = {table}" if lay.get("table_by") else "results"
        lines += [f"### {b.suite}: {title}" + (f" ({', '.join(refs)})" if refs else ""), ""]
        many = len(refs) > 1
        h = head[:-4] + (["paper table"] if many else []) + head[-4:]
        lines += ["| " + " | ".join(h) + " |", "|" + "---|" * len(h)]
        cited: List[str] = []
        for r in rows:
            e = r.entry
            cells = [*map(str, e.row), str(e.column), ours_text(e)]
            if many:
                cells.append(r.ref)
            text = _note_text(r)
            if text in numbered and text not in cited:
                cited.append(text)
            cells += [fmt_paper(b, e.reported) if e.reported else "", delta_text(b, r), status_text(r),
                      f"[{numbered[text]}]" if text in numbered else text]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
        new = [t for t in cited if t not in printed]
        lines += [f"[{numbered[t]}] {_cell(t)}" + ("  " if k < len(new) - 1 else "") for k, t in enumerate(new)]
        if new:
            lines.append("")
        earlier = [numbered[t] for t in cited if t in printed]
        if earlier:
            lines += ["Note(s) " + ", ".join(f"[{i}]" for i in earlier) + " above.", ""]
        printed.update(new)
    if s.other_metric:
        lines += [f"{s.other_metric} paper number(s) of another metric are not compared (this suite's leaderboard "
                  f"shows {lay['metric']}).", ""]
    if s.findings:
        lines += [f"### {b.suite}: findings", "", *_findings_markdown(s.findings, lay)]
    lines += missing_markdown(b.suite, s.missing, s.fill)
    return lines


def _plain(markdown: str) -> str:
    """Markdown emphasis (``**strong**``, ``*emphasis*``) and code marks dropped (the page's text is escaped,
    not rendered); an asterisk not around words (``reported/*.json``) stays."""
    return re.sub(r"\*(\w[^*]*?\w)\*", r"\1", markdown.replace("**", "")).replace("`", "")


def to_html(report: Report, sources: ReportSources) -> str:
    """The report as a self-contained page: summary, status tables and the leaderboard plots."""
    counts = report.counts()
    body = [f"<p>Generated by <code>{h.escape(sources.command)}</code> from the committed run records "
            f"(<code>{h.escape(sources.records)}/</code>) and notes (<code>{h.escape(sources.notes)}</code>); "
            f"the same tables as <code>{h.escape(sources.md)}</code>. Do not edit by hand.</p>",
            "<table><thead><tr>" + "".join(f"<th>{h.escape(k)}</th>" for k in (*STATUSES, "not run"))
            + "</tr></thead><tbody><tr>" + "".join(f"<td>{counts[k]}</td>" for k in (*STATUSES, "not run"))
            + "</tr></tbody></table>",
            f"<p>Compute: {h.escape(_hours(sum(s.wall_time_s for s in report.suites)))}, "
            f"{sum(len(s.records) for s in report.suites)} runs. Machine(s): "
            f"{h.escape(', '.join(_machines(report)) or '(none)')}.</p>",
            "<ul>" + "".join(f"<li>{h.escape(_plain(r[2:]))}</li>" for r in rules_text()) + "</ul>"]
    if report.missing():
        body.append(f"<p>Paper cells not run: {h.escape(_plain(missing_totals(report.missing())))}. "
                    f"{h.escape(_plain(gpu_caveat()))}</p>")
    fc = report.finding_counts()
    if sum(fc.values()):
        body += ["<h2 id=\"findings\">Findings</h2><p>The papers' claims about figures and tables, decided on our "
                 "cells (<code>findings</code> in <code>benchmarks/suites/reported/*.json</code>).</p>",
                 "<table><thead><tr>" + "".join(f"<th>{h.escape(k)}</th>" for k in FINDING_COUNTS)
                 + "</tr></thead><tbody><tr>" + "".join(f"<td>{fc[k]}</td>" for k in FINDING_COUNTS)
                 + "</tr></tbody></table>",
                 "<ul>" + "".join(f"<li>{h.escape(_plain(r[2:]))}</li>" for r in findings_rules_text()) + "</ul>"]
    for s in report.suites:
        b, lay = s.board, s.board.layout
        sid = slug(b.suite)
        body.append(f'<h2 id="{sid}"><a href="#{sid}">{h.escape(b.suite)}</a>: '
                    f"{h.escape(b.meta.get('title') or '')}</h2>")
        body.append(f"<p>Scale: {h.escape(_plain(s.scale))}</p>")
        if s.coverage():
            body.append(f"<p>Paper's cells: {h.escape(s.coverage())}.</p>")
        if search_description(b):
            body.append(f"<p>{h.escape(_plain(search_description(b)))}</p>")
        body.append(f"<p class=muted>{h.escape(_plain(metric_description(b)))} Records "
                    f"<code>{h.escape(_display_path(s.folder, sources.root))}</code>, {len(s.records)} runs, "
                    f"{h.escape(_hours(s.wall_time_s))}; commit(s) "
                    f"{h.escape(', '.join(c[:7] for c in b.provenance['commits']))}.</p>")
        numbered, printed = suite_notes(s), set()
        for table, t in lb.tables(b).items():
            rows = s.rows[table]
            tid = slug(b.suite, table)
            refs = sorted({r.ref for r in rows if r.ref})
            title = f"{lay['table_by']} = {table}" if lay.get("table_by") else "results"
            body.append(f'<h3 id="{tid}"><a href="#{tid}">{h.escape(title)}</a> {h.escape(", ".join(refs))}</h3>')
            head = [*lay["rows"], lay["columns"], "ours", "paper", f"{lb.diff_label(b)} [95 % interval]", "status",
                    "note"]
            body.append('<table class="sortable"><thead><tr>' + "".join(f"<th>{h.escape(str(k))}</th>" for k in head)
                        + "</tr></thead><tbody>")
            for r in rows:
                e = r.entry
                v = "" if e.summary.mean is None else f"{e.summary.mean:.6g}"
                cls = {REPRODUCED: "pos", OPEN: "neg"}.get(r.status, "")
                tds = "".join(f'<td class="k">{h.escape(str(x))}</td>' for x in (*e.row, e.column))
                tds += f'<td data-v="{v}">{h.escape(ours_text(e, diverged=False))}</td>'
                tds += f"<td>{h.escape(fmt_paper(b, e.reported)) if e.reported else ''}</td>"
                tds += f"<td>{h.escape(delta_text(b, r))}</td>"
                tds += f'<td class="{cls}">{h.escape(status_text(r))}</td>'
                text = _note_text(r)
                tds += f'<td style="text-align:left">{h.escape(f"[{numbered[text]}]" if text in numbered else text)}</td>'
                body.append(f"<tr>{tds}</tr>")
            body.append("</tbody></table>")
            new = list(dict.fromkeys(_note_text(r) for r in rows if _note_text(r) in numbered
                                     and _note_text(r) not in printed))
            if new:
                body.append("<ol class=notes>" + "".join(f'<li value="{numbered[x]}">{h.escape(x)}</li>' for x in new)
                            + "</ol>")
            printed.update(new)
            body.append(plots(b, table, t))
        if s.findings:
            body.append(f"<h3>{h.escape(b.suite)}: findings</h3>" + _findings_html(s.findings, lay))
        body.append(missing_html(b.suite, s.missing, s.fill))
    if report.unrun:
        body.append("<h2>Suites not run yet</h2><ul>" + "".join(
            f"<li><code>{h.escape(u['suite'])}</code>: "
            + (f"{u['cells']} paper cells ({h.escape(', '.join(f'{t} ({n})' for t, n in u['tables'].items()))})"
               if u["cells"] else "no paper numbers stored") + "</li>" for u in report.unrun)
            + "</ul>")
        for u in report.unrun:
            if u["findings"]:
                body.append(f"<h3>{h.escape(u['suite'])}: findings (not run)</h3>"
                            + _findings_html(u["findings"], u["layout"]))
            body.append(missing_html(u["suite"], u.get("missing", []), u.get("fill", [])))
    nav = " ".join(f'<a href="#{slug(s.board.suite)}">{h.escape(s.board.suite)}</a>' for s in report.suites)
    return page("gat-zoo reproduction report", "\n".join(body), nav)


def _findings_html(results: Sequence[fd.Result], layout: Mapping[str, Any]) -> str:
    rows = []
    for r in results:
        f = r.finding
        ran = [c for c in r.comparisons if c.verdict != fd.NOT_RUN]
        ours = "<br>".join(h.escape(f"{c.label}: {c.text} — {c.verdict}") for c in ran) if ran else \
            h.escape(f"not run (0 of {len(r.comparisons)} comparisons)")
        if ran and len(ran) < len(r.comparisons):
            ours += h.escape(f" ({len(ran)} of {len(r.comparisons)} comparisons run)")
        cls = {fd.HOLDS_SIG: "pos", fd.HOLDS: "pos", fd.CONTRADICTED: "neg"}.get(r.verdict, "")
        rows.append(f'<tr><td class="k">{h.escape(f.id)}</td><td style="text-align:left">{h.escape(f.claim)}</td>'
                    f'<td style="text-align:left">“{h.escape(f.quote)}” — {h.escape(f.source)}</td>'
                    f'<td style="text-align:left">{h.escape(fd.describe(f, layout))}</td>'
                    f'<td style="text-align:left">{ours}</td><td class="{cls}">{h.escape(_finding_verdict(r))}</td>'
                    f'<td style="text-align:left">{h.escape(_paper_text(r))}</td>'
                    f'<td style="text-align:left">{h.escape(_finding_note(r))}</td></tr>')
    head = ("finding", "claim", "paper (quote — source)", "check", "ours", "verdict", "paper's own numbers", "note")
    return ('<table class="sortable"><thead><tr>' + "".join(f"<th>{k}</th>" for k in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def missing_notes_message(report: Report, notes_path: str) -> str:
    rows = report.missing_notes()
    lines = [f"{len(rows)} open cell(s) have no note saying what was tried; add a [[note]] for each to "
             f"{notes_path} (status = \"open\" with what was tried, or \"differs\" with the measured cause):"] \
        if rows else []
    for s, table, r in rows[:30]:
        lay = s.board.layout
        when = {**({lay["table_by"]: table} if lay.get("table_by") else {}),
                **dict(zip(lay["rows"], r.entry.row)), lay["columns"]: r.entry.column}
        when_s = ", ".join(f"{k} = {v!r}" if isinstance(v, str) else f"{k} = {v}" for k, v in when.items())
        lines.append(f"  suite {s.board.suite!r}: when = {{ {when_s} }}  ours {lb.fmt(r.entry.summary)}, "
                     f"paper {fmt_paper(s.board, r.entry.reported)}, {lb.diff_label(s.board)} "
                     f"{lb.fmt_diff(s.board, r.entry.diff)}".replace("'", '"'))
    if len(rows) > 30:
        lines.append(f"  ... and {len(rows) - 30} more")
    contradicted = report.missing_finding_notes()
    if contradicted:
        lines.append(f"{len(contradicted)} contradicted finding(s) have no note; add a [[note]] with "
                     f'finding = "<id>" for each to {notes_path} (status = "differs" with the measured cause, or '
                     '"open" with what was tried):')
        for suite, r in contradicted:
            bad = [c for c in r.comparisons if c.verdict == fd.CONTRADICTED]
            lines.append(f'  suite "{suite}": finding = "{r.finding.id}"  ({r.finding.claim}; contradicted at '
                         + "; ".join(f"{c.label}: {c.text}" for c in bad[:3]) + (" ..." if len(bad) > 3 else "") + ")")
    return "\n".join(lines)
