"""The reproduction report: committed run records beside the papers' numbers, a status per cell.

``zoo report [RECORDS_DIR]`` reads every record folder under ``RECORDS_DIR`` (default
``docs/reproduction/records``; each a ``zoo bench`` output folder: ``results.jsonl`` +
``suite.resolved.json``), builds its suite's leaderboard (:mod:`zoo.bench.analyze.board`) and
writes ``docs/reproduction.md`` (deterministic: stable order, no timestamps, so it can be diffed
and checked by a test) and ``docs/reproduction/index.html`` (the same tables as a page with plots).

Status of a cell that has a paper number (:func:`status_of`; the comparison is
:mod:`zoo.bench.report.agreement`: the 95 % interval of ours − paper, Welch, with the paper's
spread where stored and a prediction interval for a one-run paper number, against a margin of
3 accuracy points or 0.5 energy decade):

* *reproduced* — the interval lies within the margin;
* *consistent, too noisy to tell* — it contains 0 but reaches past the margin (the page says how
  many runs of ours would decide it);
* *differs — explained* — it excludes 0 (not within the margin), and the notes file gives the
  measured cause (``status = "differs"``);
* *open* — it differs and is not explained; the notes file must say what was tried
  (``status = "open"``), else the report is refused (:class:`MissingNotesError`);
* *underspecified* — the paper does not define the protocol behind its number (what it leaves
  out is listed, each with the measured sensitivity of our numbers to it): no run can settle the
  cell, whatever its numbers (``status = "underspecified"`` with ``leaves_out``).

The runs behind the paper's numbers come from the reported file's ``runs`` (``{"n": 5, "source":
"§4", "quote": "..."}``; ``null`` or absent: not stated, each number read as one run); an entry's
own ``runs`` (the same form, its ``n`` with the ``source`` and verbatim ``quote`` that state it)
overrides the file's, for a paper whose numbers come from different numbers of runs.

Only the reading the suite declares as the text's gets a status: where several cells carry one
paper number, the reported file's ``readings`` (:mod:`zoo.bench.report.readings`) names the
text's; the others are *alternative readings* (paper number and Δ shown, no status, not
counted).  The paper's numbers, their ``readings`` and the leaderboard ``metric`` come from the
shipped suite (a corrected transcription or metric reaches the report without a re-run: every
record holds all of its splits' metrics); the cells are the records' own suite.

Notes file (``docs/reproduction/notes.toml``)::

    [[note]]
    suite = "balance_table2"                        # a suite name (required)
    table = "Table 2"                                # optional: the paper's table reference
    when = { dataset = "cornell_npz", num_layers = 10, init = "bal_x" }   # optional cell selector
    status = "open"                                  # "open", "differs" or "underspecified"
    note = "what was tried / the measured cause"
    leaves_out = [{ choice = "...", sensitivity = "..." }]   # "underspecified" only (required there)

A cell takes the most specific matching note (most ``when`` keys, then ``table``; the later one
on a tie).  ``when`` keys are cell keys (as in ``--where``); values may be lists (alternatives)
and plugin names may be aliases (``bal_x``).

Findings.  Many results are figures or sentences, not table numbers; a suite's reported file
(``benchmarks/suites/reported/<suite>.json``, wired by ``reported = ...`` in the suite) may carry
a ``findings`` list beside ``entries``: each an ``id``, our one-line ``claim``, the paper's
``source`` (section / figure) and ``quote``, and a ``check`` on the suite's leaderboard cells::

    {"id": "gat_beats_gatv2", "claim": "One GAT layer fits twin better than one GATv2 layer, at every k",
     "source": "§4.5.2, Fig. 1", "quote": "The more surprising result is that GAT outperforms GATv2 on this task.",
     "check": {"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "over": "k"}}

Kinds: ``greater`` / ``less`` (``a``, ``b``), ``at_least`` / ``at_most`` (``cells``, ``value``),
``increasing`` / ``decreasing`` (``cells``), ``bounded`` (``cells``, ``spread``); optional
``where``, ``over``, ``metric`` (``"epochs_to_best"``).  Verdicts (per comparison, from means and
95 % CIs; :mod:`zoo.bench.report.findings` has the exact rules): *holds (significant)*, *holds*,
*inconclusive*, *contradicted*, *not run*.  The report shows each finding per suite (quote,
source, the check in words, our numbers per comparison, the verdict, the same check on the
paper's own stored numbers where it has them) and counts them in the summary.  The shipped
findings are validated against the full shipped suite (unknown kinds, keys or values are errors
naming close matches).  A *contradicted* finding needs a note naming it::

    [[note]]
    suite = "oxford_fig1"
    finding = "gat_beats_gatv2"                      # instead of table / when
    status = "differs"                               # or "open"
    note = "the measured cause / what was tried"
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import close_matches, normalize_name
from zoo.bench.analyze import board as lb
from zoo.bench.report import agreement as ag
from zoo.bench.report import findings as fd
from zoo.bench.report import note_figures as nf
from zoo.bench.report import shipped
from zoo.bench.report.errors import ReportError
from zoo.bench.report.missing_cost import FillCommand, MissingCell
from zoo.bench.report.notes import (DIFFERS, OPEN, UNDERSPECIFIED, Note, SuiteContext, cell_keys, default_notes,
                                    load_notes, note_for, paper_tables)
from zoo.bench.report.readings import Readings, ReadingsError, parse_readings, text_entries
from zoo.bench.report.scale import describe_scale
from zoo.bench.store.folders import read_folder
from zoo.bench.store.records import RESOLVED_FILE, read_resolved
from zoo.bench.suite.cells import cell_value

PathLike = Union[str, Path]

NO_PAPER = "—"
REPRODUCED, NOISY = ag.REPRODUCED, ag.NOISY
#: a cell beside a paper number that is not the text's reading (zoo.bench.report.readings): shown, no status
ALTERNATIVE = "alternative reading"
ALTERNATIVE_NOT_RUN = "alternative reading not run"
STATUSES = (REPRODUCED, NOISY, DIFFERS, OPEN, UNDERSPECIFIED)
MISSING_NOTE = "NO NOTE YET (zoo report --draft): add one to notes.toml"


# --------------------------------------------------------------------------- status rules


def comparison_values(entry: lb.Entry, geometric: bool) -> List[float]:
    """A cell's run values on the comparison scale: finite ones, in log10 for energies (as its summary)."""
    xs = [float(v) for v in entry.values if v is not None and math.isfinite(float(v))]
    return [math.log10(x) for x in xs if x > 0] if geometric else xs


def cell_agreement(entry: lb.Entry, geometric: bool, paper_runs: Optional[int] = None) -> Optional[ag.Agreement]:
    """How ``entry`` compares with its paper number (``None``: it has none): the 95 % interval of
    ours − paper and the outcome against the margin of its metric kind
    (:mod:`zoo.bench.report.agreement`).  ``paper_runs``: the runs the paper states behind its
    numbers (``None``: not stated, read as one run).  A cell without one finite value of ours, or
    an energy the paper gives as <= 0, *differs*."""
    if entry.reported is None:
        return None
    margin = ag.MARGINS[ag.margin_unit(geometric)]
    paper = ag.paper_number(entry.reported, paper_runs, geometric)
    values = comparison_values(entry, geometric)
    if paper is None or not values:
        return ag.Agreement(ag.DIFFERS, math.nan, math.nan, math.nan, margin, len(values))
    return ag.compare(values, paper, margin)


# --------------------------------------------------------------------------- notes


# --------------------------------------------------------------------------- the report


@dataclass
class Row:
    """One cell of a report table."""

    entry: lb.Entry
    ref: str  # the paper's table reference ("" without a paper number)
    status: str
    note: Optional[Note] = None
    explanation: str = ""  # shown where there is no note (an alternative reading: why it has no status)
    agreement: Optional[ag.Agreement] = None  # the comparison with the paper's number (None: no paper number)
    #: the fewest runs of a compared cell in the same table, where this cell has more (unequal seeds)
    table_runs: Optional[int] = None


@dataclass
class SuiteReport:
    folder: Path
    board: lb.Board
    info: Dict[str, Any]
    records: List[Dict[str, Any]]
    rows: Dict[Any, List[Row]]  # board table -> rows
    scale: str
    not_run: Dict[str, int]  # paper table -> paper cells without records
    other_metric: int  # paper numbers of a metric this suite's leaderboard does not show
    reported_changed: bool = False  # the shipped paper numbers differ from the copy stored with the records
    findings: List[fd.Result] = field(default_factory=list)  # the paper's qualitative claims, decided on the cells
    missing: List[MissingCell] = field(default_factory=list)  # paper cells without records: cost and class
    fill: List[FillCommand] = field(default_factory=list)     # the commands that would run them
    unmatched: List[Dict[str, Any]] = field(default_factory=list)  # those paper entries
    readings: Optional[Readings] = None  # which cells are the text's reading (zoo.bench.report.readings)
    alternatives_not_run: int = 0  # paper numbers beside an alternative reading whose cell has no records

    @property
    def wall_time_s(self) -> float:
        return sum(float(r.get("wall_time_s") or 0.0) for r in self.records)

    def coverage(self) -> str:
        """Per paper table: how many of its cells were run, with how many runs each."""
        run: Dict[str, List[int]] = {}
        for rows in self.rows.values():
            for r in rows:
                if r.ref and r.status != ALTERNATIVE:
                    run.setdefault(r.ref, []).append(r.entry.summary.n)
        parts = []
        for ref in sorted(set(run) | set(self.not_run)):
            ns = sorted(run.get(ref, []))
            total = len(ns) + self.not_run.get(ref, 0)
            each = "" if not ns else f" (n = {ns[0]}" + (f"–{ns[-1]}" if ns[-1] != ns[0] else "") + ")"
            parts.append(f"{ref} — {len(ns)} of {total} cells run{each}")
        return "; ".join(parts)


@dataclass
class Report:
    suites: List[SuiteReport]
    unrun: List[Dict[str, Any]]  # suites with paper numbers but no record folder
    notes: List[Note]
    #: figures a note writes out that the records contradict or could state (zoo.bench.report.note_figures)
    figure_problems: List[str] = field(default_factory=list)

    def findings(self) -> List[Tuple[str, fd.Result]]:
        """``(suite, result)`` of every finding: suites with records first, then those not run."""
        return [(s.board.suite, r) for s in self.suites for r in s.findings] + \
            [(u["suite"], r) for u in self.unrun for r in u.get("findings", [])]

    def finding_counts(self) -> Dict[str, int]:
        return finding_counts(r for _, r in self.findings())

    def missing_finding_notes(self) -> List[Tuple[str, fd.Result]]:
        """Contradicted findings without a note (``finding = "<id>"``) giving the cause or what was tried."""
        return [(s, r) for s, r in self.findings() if r.verdict == fd.CONTRADICTED and r.note is None]

    def missing(self) -> List[MissingCell]:
        """Every paper cell without records, with its estimated cost and class."""
        return [m for s in self.suites for m in s.missing] + [m for u in self.unrun for m in u.get("missing", [])]

    def counts(self) -> Dict[str, int]:
        out = {s: 0 for s in STATUSES}
        out["not run"] = sum(sum(s.not_run.values()) for s in self.suites) + sum(u["cells"] for u in self.unrun)
        out["no paper number"] = 0
        out[ALTERNATIVE] = 0
        out[ALTERNATIVE_NOT_RUN] = sum(s.alternatives_not_run for s in self.suites) + \
            sum(u["alternatives_not_run"] for u in self.unrun)
        for s in self.suites:
            for rows in s.rows.values():
                for r in rows:
                    out[r.status if r.status != NO_PAPER else "no paper number"] += 1
        return out

    def unequal_runs(self) -> List[Tuple[SuiteReport, Row]]:
        """Compared cells with more runs than another compared cell of their table (flagged on the page)."""
        return [(s, r) for s in self.suites for rows in s.rows.values() for r in rows if r.table_runs is not None]

    def unused_notes(self) -> List[Note]:
        """Notes of suites with records that match none of their compared cells (a typo in ``when``?)."""
        have = {s.board.suite for s in self.suites}
        return [n for n in self.notes if n.suite in have and not n.used and n.finding is None]

    def missing_notes(self) -> List[Tuple[SuiteReport, Any, Row]]:
        return [(s, t, r) for s in self.suites for t, rows in s.rows.items() for r in rows
                if r.status == OPEN and r.note is None]


FINDING_COUNTS = ("held", "significant", "contradicted", "inconclusive", "not run")


def finding_counts(results: Any) -> Dict[str, int]:
    """``held`` (holds, significant or not; ``significant``: of those, with non-overlapping CIs),
    ``contradicted``, ``inconclusive``, ``not run``."""
    out = {k: 0 for k in FINDING_COUNTS}
    for r in results:
        if r.verdict in (fd.HOLDS, fd.HOLDS_SIG):
            out["held"] += 1
            out["significant"] += r.verdict == fd.HOLDS_SIG
        else:
            out[r.verdict] += 1
    return out


def record_folders(records_dir: PathLike) -> List[Path]:
    """The record folders under ``records_dir`` (sorted), or ``records_dir`` itself if it is one."""
    root = Path(records_dir)
    if not root.is_dir():
        raise ReportError(f"records folder {root} does not exist; pass the folder holding the run records "
                          f"(e.g. docs/reproduction/records, from the repository root)")
    if (root / RESOLVED_FILE).is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / RESOLVED_FILE).is_file())


def suite_report(folder: Path, notes: Sequence[Note], reported: Optional[Dict[str, Any]] = None,
                 metric: Optional[str] = None) -> SuiteReport:
    """One suite's part of the report.  ``reported``: the paper's numbers to compare with (the
    shipped file, so that a corrected transcription reaches the report without a re-run);
    default: the copy stored with the records.  ``metric``: the shipped suite's leaderboard
    metric (which recorded metric the paper's numbers are, e.g. LipschitzNorm §10.2's validation
    accuracy), likewise without a re-run: every record holds all of its splits' metrics."""
    folder, info, recs, dropped = read_folder(folder)
    stale = reported is not None and _numbers(reported) != _numbers(info.get("reported"))
    if reported is not None:
        info = {**info, "reported": reported}
    if metric is not None and metric != info["leaderboard"]["metric"]:
        info = {**info, "leaderboard": {**info["leaderboard"], "metric": metric}}
    board = lb.aggregate(info, recs)
    board.dropped = dropped
    log_metric = lb.is_log_metric(board)
    readings = _readings(info)
    runs = entry_runs(info.get("reported"), f"{info.get('name')}: reported numbers")
    rows: Dict[Any, List[Row]] = {}
    for e in board.entries:
        agreement = cell_agreement(e, log_metric, runs.get(id(e.reported)))
        ref = str(e.reported["table"]) if e.reported is not None else ""
        reading = None if readings is None else fd.entry_value(board, e, readings.key)
        if agreement is not None and readings is not None and not readings.is_text(reading):
            rows.setdefault(e.table, []).append(Row(e, ref, ALTERNATIVE, None, readings.explanation(reading),
                                                    agreement))
            continue
        note = note_for(board, e, ref, notes) if agreement is not None else None
        rows.setdefault(e.table, []).append(Row(e, ref, status_of(agreement, note), note, agreement=agreement))
    flag_unequal_runs(rows)
    # a paper number is run once the text's reading of it is (a number keyed by model / norm, not by
    # the readings key, also matches the alternatives' cells: those do not run the paper's cell)
    by_text = {id(r.entry.reported) for rs in rows.values() for r in rs if r.ref and r.status != ALTERNATIVE}
    by_any = {id(e.reported) for e in board.entries if e.reported is not None}
    not_run: Dict[str, int] = {}
    unmatched = []
    other = 0
    alternatives_not_run = 0
    ignore = ("layer",) if board.layout.get("metric") == "pruned" else ()
    entries = (info.get("reported") or {}).get("entries", [])
    text = {id(e) for e in text_entries(entries, readings, info["cells"], ignore)}
    for r in entries:
        if r.get("metric", board.layout["metric"]) != board.layout["metric"]:
            other += 1
        elif id(r) not in text:
            alternatives_not_run += id(r) not in by_any
        elif id(r) not in by_text:
            not_run[str(r["table"])] = not_run.get(str(r["table"]), 0) + 1
            unmatched.append(r)
    ns = sorted({e.summary.n for e in board.entries})
    scale = describe_scale(info, recs)
    if ns:
        scale += f" Runs per table cell: {ns[0]}" + (f"–{ns[-1]}" if ns[-1] != ns[0] else "") + "."
    return SuiteReport(folder, board, info, recs, rows, scale, not_run, other, stale, unmatched=unmatched,
                       readings=readings, alternatives_not_run=alternatives_not_run)


def flag_unequal_runs(rows: Mapping[Any, List[Row]]) -> None:
    """Mark each compared cell that has more runs than another compared cell of its table: a table's
    cells run the same seeds, and seeds added to some cells only (say, the failing ones) bias the
    statuses.  The fix is to give the others the same seeds, never to drop runs."""
    for table_rows in rows.values():
        compared = [r for r in table_rows if r.agreement is not None and r.status != ALTERNATIVE]
        if not compared:
            continue
        fewest = min(r.entry.summary.n for r in compared)
        for r in compared:
            r.table_runs = fewest if r.entry.summary.n > fewest else None


def status_of(agreement: Optional[ag.Agreement], note: Optional[Note]) -> str:
    """A cell's status: an *underspecified* note decides it whatever the numbers; else the
    numbers do, and a cell that differs is *differs — explained* or *open* by its note."""
    if agreement is None:
        return NO_PAPER
    if note is not None and note.status == UNDERSPECIFIED:
        return UNDERSPECIFIED
    if agreement.outcome != ag.DIFFERS:
        return agreement.outcome
    return note.status if note is not None else OPEN


def paper_runs(reported: Optional[Mapping[str, Any]], origin: str,
               entry: Optional[Mapping[str, Any]] = None) -> Optional[int]:
    """The runs behind a paper number: ``entry``'s own ``runs`` where it has one, else the reported
    file's (``runs.n``; ``None``: not stated, the number read as one run).  An entry's ``n`` needs
    the ``source`` and verbatim ``quote`` that state it."""
    own = entry is not None and "runs" in entry
    raw = entry["runs"] if own else (reported or {}).get("runs")  # type: ignore[index]
    if raw is None:
        return None
    n = raw.get("n") if isinstance(raw, Mapping) else raw
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ReportError(f"{origin}: runs.n must be the number of runs behind each paper number (an int >= 1) "
                          f"or null where the paper does not say, got {n!r}")
    if own and n is not None and not (isinstance(raw, Mapping) and raw.get("source") and raw.get("quote")):
        raise ReportError(f"{origin}: an entry's runs.n needs the 'source' and the verbatim 'quote' that state it "
                          f"(\"runs\": {{\"n\": {n}, \"source\": \"...\", \"quote\": \"...\"}}), got {raw!r}")
    return n


def entry_runs(reported: Optional[Mapping[str, Any]], origin: str) -> Dict[int, Optional[int]]:
    """:func:`paper_runs` of every entry of ``reported``, by the entry's ``id`` (each checked once)."""
    entries = (reported or {}).get("entries") or []
    return {id(e): paper_runs(reported, f"{origin}, entry #{i + 1}", e) for i, e in enumerate(entries)}


def _numbers(reported: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The paper's entries without the runs behind them: stating the runs edits no number."""
    return [{k: v for k, v in e.items() if k != "runs"} for e in (reported or {}).get("entries") or []]


def _readings(info: Mapping[str, Any]) -> Optional[Readings]:
    """The text's reading declared by the suite's reported file (``None``: every cell is the text's)."""
    reported = info.get("reported") or {}
    origin = f"benchmarks/suites/{info.get('meta', {}).get('reported')}"
    try:
        readings = parse_readings(reported.get("readings"), origin)
    except ReadingsError as e:
        raise ReportError(str(e)) from None
    if readings is not None:
        keys = cell_keys(info["leaderboard"], info["cells"])
        if readings.key not in keys:
            raise ReportError(f"{origin}: readings.key {readings.key!r} is not a cell key of suite {info.get('name')!r}"
                              + (f" (did you mean {' or '.join(map(repr, close_matches(readings.key, keys)))}?)"
                                 if close_matches(readings.key, keys) else "") + f". Cell keys: {', '.join(keys)}.")
        have = {fd.value_key(cell_value(c["config"], readings.key)) for c in info["cells"]}
        unknown = [v for v in readings.text if fd.value_key(v) not in have]
        if unknown:
            raise ReportError(f"{origin}: readings.text value(s) {', '.join(map(repr, unknown))} are not "
                              f"{readings.key} values of any cell; fix the spelling")
    return readings


def build_report(records_dir: PathLike, notes_path: Optional[PathLike] = None) -> Report:
    """Read every record folder under ``records_dir`` and the notes (default: ``records_dir/../notes.toml``)."""
    folders = record_folders(records_dir)
    infos = {f: read_resolved(f) for f in folders}
    by_suite: Dict[str, Path] = {}
    for f, info in infos.items():
        name = normalize_name(str(info.get("name")))
        if name in by_suite:
            raise ReportError(f"{by_suite[name]} and {f} both hold suite {name!r}; combine them into one "
                              "folder with `zoo merge A B --out DIR` (one folder per suite)")
        by_suite[name] = f
    ship = shipped.suites()
    contexts = {name: SuiteContext(paper_tables(s["meta"], s["reported"]), s["keys"], [f.id for f in s["findings"]])
                for name, s in ship.items()}
    for name, f in by_suite.items():  # the records' own suite (what was run) wins over the shipped file
        info = infos[f]
        reported = ship[name]["reported"] if name in ship and ship[name]["reported"] else info.get("reported")
        ids = [f.id for f in ship[name]["findings"]] if name in ship else \
            [str(f.get("id")) for f in ((info.get("reported") or {}).get("findings") or []) if isinstance(f, dict)]
        contexts[name] = SuiteContext(paper_tables(info.get("meta", {}), reported),
                                      cell_keys(info["leaderboard"], info["cells"]), ids)
    root = Path(records_dir)
    notes = load_notes(Path(notes_path) if notes_path is not None else default_notes(root), contexts)
    suites = [suite_report(f, notes, ship[name]["reported"] if name in ship else None,
                           ship[name]["metric"] if name in ship else None)
              for name, f in sorted(by_suite.items())]
    for s in suites:
        name = normalize_name(str(s.info.get("name")))
        s.findings = shipped.suite_findings(name, ship.get(name), s.info, s.board, notes, s.records)
        s.missing, s.fill = shipped.missing_costs(name, s.unmatched, ship.get(name), s.info, s.records,
                                                  s.board.layout, s.readings)
    unrun = []
    for name, s in sorted(ship.items()):
        if name in by_suite:
            continue
        all_entries = [e for e in (s["reported"] or {}).get("entries", []) if e.get("metric", s["metric"]) == s["metric"]]
        readings = shipped.text_readings(name, s["reported"])
        cells = shipped.suite_cells(str(s["path"]), Path(s["path"]).stat().st_mtime_ns)[1] if readings else ()
        entries = text_entries(all_entries, readings, cells, ("layer",) if s["metric"] == "pruned" else ())
        per_table: Dict[str, int] = {}
        for e in entries:
            per_table[str(e["table"])] = per_table.get(str(e["table"]), 0) + 1
        missing, fill = shipped.missing_costs(name, entries, s, None, [], s["layout"], readings)
        unrun.append({"suite": name, "title": s["meta"].get("title", name), "cells": len(entries),
                      "alternatives_not_run": len(all_entries) - len(entries),
                      "tables": per_table, "findings": shipped.suite_findings(name, s, None, None, notes),
                      "layout": s["layout"], "missing": missing, "fill": fill})
    return Report(suites, unrun, notes, bind_notes(suites, notes, Path(notes_path) if notes_path is not None
                                                   else default_notes(root)))


def bind_notes(suites: Sequence[SuiteReport], notes: Sequence[Note], path: Path) -> List[str]:
    """Fill each note's placeholders from its suite's records (``note.text``) and return the problems
    with the figures notes write out (:func:`zoo.bench.report.note_figures.drift`)."""
    by_suite = {s.board.suite: s for s in suites}
    problems: List[str] = []
    for n in notes:
        s = by_suite.get(n.suite)
        if s is None:  # a suite without records is not on the page: nothing to fill or check against
            continue
        where = f"{path.name} [[note]] #{n.index} ({n.suite})"
        rows = [r for rs in s.rows.values() for r in rs]
        by_entry = {id(r.entry): r for r in rows}

        def decided(e: lb.Entry, name: str) -> str:
            r = by_entry[id(e)]
            if name == "status":
                return r.status
            return r.agreement.interval_text() if r.agreement is not None else ""
        board = s.board
        try:
            n.text = nf.fill(n.raw or n.text, board, n.when, where, decided)
            n.leaves_out = [(nf.fill(c, board, n.when, where, decided), nf.fill(x, board, n.when, where, decided))
                            for c, x in (n.raw_leaves_out or n.leaves_out)]
        except nf.NoteFigureError as e:
            raise ReportError(str(e)) from None
        written = " ".join([n.raw or n.text, *(x for pair in (n.raw_leaves_out or n.leaves_out) for x in pair)])
        problems += nf.drift(written, s.board, [r.entry for r in rows if r.note is n], where)
    return problems


