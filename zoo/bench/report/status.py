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

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import close_matches, normalize_name, unknown_name_error
from zoo._toml import tomllib
from zoo.bench.report import agreement as ag
from zoo.bench.analyze import board as lb
from zoo.bench.report import findings as fd
from zoo.bench.report import note_figures as nf
from zoo.bench.report.missing_cost import (SLICE_KEYS, FillCommand, MissingCell, entry_matches, fill_commands,
                                            missing_cells, pending_seconds)
from zoo.bench.report.readings import Readings, ReadingsError, parse_readings
from zoo.bench.analyze.best_point import search_axes
from zoo.bench.suite.cells import cell_value
from zoo.bench.plan.cost import shipped_table
from zoo.bench.plan.cost_file import shipped_model
from zoo.bench.plan.estimate import expected_epochs_of
from zoo.bench.suite.measures import metric_spec
from zoo.bench.suite.load import list_suites, load_suite, suites_dir
from zoo.bench.suite.reported import load_reported
from zoo.bench.suite.schema import PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS
from zoo.bench.suite.settings import describe_settings
from zoo.bench.store.folders import read_folder
from zoo.bench.store.records import RESOLVED_FILE, read_resolved

PathLike = Union[str, Path]
NOTES_FILE = "notes.toml"  # next to the records folder: docs/reproduction/notes.toml

NO_PAPER = "—"
REPRODUCED, NOISY = ag.REPRODUCED, ag.NOISY
DIFFERS, OPEN = "differs — explained", "open"
#: the paper does not define the protocol behind its number: no run can settle the cell
UNDERSPECIFIED = "underspecified"
#: a cell beside a paper number that is not the text's reading (zoo.bench.report.readings): shown, no status
ALTERNATIVE = "alternative reading"
ALTERNATIVE_NOT_RUN = "alternative reading not run"
STATUSES = (REPRODUCED, NOISY, DIFFERS, OPEN, UNDERSPECIFIED)
NOTE_STATUS = {"differs": DIFFERS, "open": OPEN, "underspecified": UNDERSPECIFIED}
NOTE_KEYS = ("suite", "table", "when", "finding", "status", "note", "leaves_out")
LEAVES_OUT_KEYS = ("choice", "sensitivity")
MISSING_NOTE = "NO NOTE YET (zoo report --draft): add one to notes.toml"


class ReportError(ValueError):
    """A record folder or the notes file cannot make a report; the message names the fix."""


class MissingNotesError(ReportError):
    """Some *open* cells have no note saying what was tried."""


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


@dataclass
class Note:
    suite: str
    status: str  # DIFFERS or OPEN
    text: str
    table: Optional[str] = None
    when: Dict[str, List[Any]] = field(default_factory=dict)
    index: int = 0  # position in the file (1-based), for messages and tie-breaking
    used: bool = False  # matched a cell with a paper number (set while building the report)
    finding: Optional[str] = None  # the id of a finding (zoo.bench.report.findings) this note explains, not cells
    #: status "underspecified": what the paper leaves out, each ``(choice, measured sensitivity)``
    leaves_out: List[Tuple[str, str]] = field(default_factory=list)
    raw: str = ""  # the text as written, placeholders unfilled (``text`` is filled from the records)
    raw_leaves_out: List[Tuple[str, str]] = field(default_factory=list)  # ``leaves_out`` as written

    @property
    def specificity(self) -> Tuple[int, int, int]:
        return (len(self.when), int(self.table is not None), self.index)


@dataclass
class SuiteContext:
    """What a note of one suite may name: its paper tables and its cell keys."""

    tables: List[str]
    keys: List[str]
    findings: List[str] = field(default_factory=list)  # the ids of the suite's findings


def load_notes(path: PathLike, contexts: Mapping[str, SuiteContext]) -> List[Note]:
    """Read and validate a notes file (absent file: no notes).  Unknown suites, keys, tables,
    statuses or names are errors naming the entry and the close matches."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        raw = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not valid TOML: {e}") from None
    extra = [k for k in raw if k != "note"]
    if extra:
        raise ReportError(f"{path}: unknown table(s) {extra}; write each note as a [[note]] table "
                          f"with keys {', '.join(NOTE_KEYS)}")
    items = raw.get("note", [])
    if not isinstance(items, list):
        raise ReportError(f"{path}: 'note' must be an array of tables: write [[note]], not [note]")
    notes = []
    for i, item in enumerate(items, 1):
        where = f"{path} [[note]] #{i}"
        unknown = [k for k in item if k not in NOTE_KEYS]
        if unknown:
            parts = [repr(k) + (f" (did you mean {' or '.join(map(repr, close_matches(k, NOTE_KEYS)))}?)"
                                if close_matches(k, NOTE_KEYS) else "") for k in unknown]
            raise ReportError(f"{where}: unknown key(s) {', '.join(parts)}. Valid keys: {', '.join(NOTE_KEYS)}.")
        for k in ("suite", "status", "note"):
            if not isinstance(item.get(k), str) or not item[k].strip():
                raise ReportError(f"{where}: needs a non-empty string {k!r}")
        suite = normalize_name(item["suite"])
        if suite not in contexts:
            raise ReportError(f"{where}: {unknown_name_error('suite', item['suite'], contexts)}")
        status = normalize_name(item["status"])
        if status not in NOTE_STATUS:
            raise ReportError(f"{where}: {unknown_name_error('status', item['status'], NOTE_STATUS)} "
                              "('reproduced' is decided by the numbers, not by a note)")
        ctx = contexts[suite]
        table = item.get("table")
        if table is not None:
            if not isinstance(table, str) or table not in ctx.tables:
                near = close_matches(str(table), ctx.tables)
                raise ReportError(f"{where}: suite {suite!r} has no paper table {table!r}"
                                  + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                                  + f". Its tables: {', '.join(ctx.tables) or '(none)'}.")
        when_raw = item.get("when", {})
        if not isinstance(when_raw, dict):
            raise ReportError(f"{where}: 'when' must be a table of key = value(s), e.g. when = {{ num_layers = 10 }}")
        when: Dict[str, List[Any]] = {}
        for key, value in when_raw.items():
            if key not in ctx.keys:
                near = close_matches(key, ctx.keys)
                raise ReportError(f"{where}: 'when' key {key!r} is not a cell key of suite {suite!r}"
                                  + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                                  + f". Cell keys: {', '.join(ctx.keys)}.")
            try:
                when[key] = [fd.canonical_value(key, v) for v in (value if isinstance(value, list) else [value])]
            except ValueError as e:
                raise ReportError(f"{where}: when.{key}: {e}") from None
        finding = item.get("finding")
        if finding is not None:
            if table is not None or when:
                raise ReportError(f"{where}: a note names either a finding or cells (table / when), not both; "
                                  "write two notes")
            if not isinstance(finding, str) or finding not in ctx.findings:
                near = close_matches(str(finding), ctx.findings)
                raise ReportError(f"{where}: suite {suite!r} has no finding {finding!r}"
                                  + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                                  + f". Its findings: {', '.join(ctx.findings) or '(none)'}.")
        leaves_out = _leaves_out(item, NOTE_STATUS[status], where)
        notes.append(Note(suite, NOTE_STATUS[status], item["note"].strip(), table, when, i, finding=finding,
                          leaves_out=list(leaves_out), raw=item["note"].strip(), raw_leaves_out=leaves_out))
    return notes


def _leaves_out(item: Mapping[str, Any], status: str, where: str) -> List[Tuple[str, str]]:
    """An *underspecified* note's list of what the paper leaves out, each with the measured
    sensitivity of our numbers to it (required: it is what the status rests on); other notes have none."""
    raw = item.get("leaves_out")
    example = 'leaves_out = [{ choice = "initialisation", sensitivity = "1.3x Xavier moves L = 2 by +0.3 decades" }]'
    if status != UNDERSPECIFIED:
        if raw is not None:
            raise ReportError(f"{where}: 'leaves_out' belongs to a note with status = \"underspecified\"")
        return []
    if not isinstance(raw, list) or not raw:
        raise ReportError(f"{where}: an underspecified note must list what the paper leaves out and the measured "
                          f"sensitivity of our numbers to each choice: {example}")
    out = []
    for k, choice in enumerate(raw, 1):
        if not isinstance(choice, dict) or sorted(choice) != sorted(LEAVES_OUT_KEYS) or \
                not all(isinstance(choice[x], str) and choice[x].strip() for x in LEAVES_OUT_KEYS):
            raise ReportError(f"{where}: leaves_out #{k} needs exactly the non-empty strings "
                              f"{' and '.join(LEAVES_OUT_KEYS)}, e.g. {example}")
        out.append((choice["choice"].strip(), choice["sensitivity"].strip()))
    return out


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


def _note_for(board: lb.Board, entry: lb.Entry, ref: str, notes: Sequence[Note]) -> Optional[Note]:
    best = None
    for n in notes:
        if n.suite != board.suite or n.finding is not None or (n.table is not None and n.table != ref):
            continue
        if fd.matches(board, entry, n.when):
            n.used = True
            if best is None or n.specificity > best.specificity:
                best = n
    return best


def _fixed_keys() -> set:
    return set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)


def cell_keys(layout: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> List[str]:
    """Keys a note's ``when`` may test: the fixed cell keys, the leaderboard's, and every model /
    dataset option the suite's cells set."""
    keys = _fixed_keys() | set(layout.get("rows", [])) | {layout.get("columns", "num_layers")}
    for c in cells:
        keys.update(c["config"]["model"]["kwargs"])
        keys.update(c["config"]["task"]["options"])
    return sorted(keys)


def _raw_keys(raw: Mapping[str, Any]) -> List[str]:
    """Cell keys a suite file sets (without expanding it): what a note may test before any record exists."""
    tables = [raw.get("defaults") or {}, raw.get("grid") or {}, *(raw.get("variants") or {}).values(),
              *(raw.get("override") or []), *((raw.get("quick") or {}).get(t) or {} for t in ("defaults", "grid"))]
    keys = _fixed_keys() | set((raw.get("leaderboard") or {}).get("rows", []))
    keys.add((raw.get("leaderboard") or {}).get("columns", "num_layers"))
    for t in tables:
        for k, v in t.items():
            if k in ("arch", "data") and isinstance(v, dict):
                keys.update(v)
            elif k != "when":
                keys.add(k)
    return sorted(keys)


def _paper_tables(meta: Mapping[str, Any], reported: Optional[Mapping[str, Any]]) -> List[str]:
    tables = [str(t) for t in meta.get("tables") or []]
    for e in (reported or {}).get("entries", []):
        if str(e["table"]) not in tables:
            tables.append(str(e["table"]))
    return tables


def _fmt_values(values: List[Any]) -> str:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if ints and len(values) > 2 and values == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(map(str, values))


def describe_scale(info: Dict[str, Any], recs: Sequence[Dict[str, Any]]) -> str:
    """Which part of the suite the records cover, exactly: per shape key the values run out of
    the suite's, the number of runs, and the protocol (the suite's full one, its quick form, or
    reduced with ``zoo bench --set``: each set value beside the suite's)."""
    if not recs:
        return f"**no runs yet** — none of the {'--quick form' if info.get('quick') else 'suite'}'s " \
               f"{len(info['cells'])} runs is recorded."
    lay = info["leaderboard"]
    keys = [k for k in (lay.get("table_by"), *lay["rows"], lay["columns"] if not metric_spec(lay["metric"]).per_layer else None,
                        *((info.get("selection") or {}).get("where") or {}), *search_axes(info), "seed") if k]
    keys = list(dict.fromkeys(keys))
    parts = []
    full_scale = len(recs) == len(info["cells"])
    for key in keys:
        suite_vals: Dict[str, Any] = {}
        for c in info["cells"]:
            v = cell_value(c["config"], key)
            suite_vals.setdefault(fd.value_key(v), v)
        ran = {fd.value_key(cell_value(r["config"], key)) for r in recs}
        if len(suite_vals) < 2 and key != "seed":
            continue
        order = sorted(suite_vals, key=lambda k: lb.sort_key(suite_vals[k]))
        covered = [suite_vals[k] for k in order if k in ran]
        if len(covered) == len(order):
            parts.append(f"{key} all {len(order)} ({_fmt_values(covered)})" if key == "seed" or len(order) <= 8
                         else f"{key} all {len(order)}")
        else:
            parts.append(f"{key} {_fmt_values(covered)} ({len(covered)} of {len(order)}: "
                         f"{_fmt_values([suite_vals[k] for k in order])})")
    epochs = sorted({r["config"]["train"]["epochs"] for r in recs})
    reduced = describe_settings(info)
    epochs_text = "" if "epochs" in (info.get("set") or {}) else f"epochs {_fmt_values(epochs)}, "
    if info.get("quick"):
        protocol = f"the suite's --quick form (epochs {_fmt_values(epochs)}): not the paper's protocol"
        if reduced:
            protocol = f"the suite's --quick form, reduced with --set {reduced} (epochs {_fmt_values(epochs)}): " \
                       "not the paper's protocol"
    elif reduced:
        protocol = f"reduced with --set {reduced}; {epochs_text}everything else as in the suite file"
    else:
        protocol = f"the suite's full protocol (epochs {_fmt_values(epochs)}, stop and selection as in the suite file)"
    if info.get("quick"):
        head = f"**quick form** — {len(recs)} of the --quick form's {len(info['cells'])} runs (not the paper's scale)"
    elif reduced:
        runs = f"all {len(info['cells'])}" if full_scale else f"{len(recs)} of the suite's {len(info['cells'])}"
        head = f"**stated-reduced** — {runs} runs, at a reduced protocol (zoo bench --set)"
    elif full_scale:
        head = f"**full** — all {len(info['cells'])} runs"
    else:
        head = f"**stated-reduced** — {len(recs)} of the suite's {len(info['cells'])} runs"
    return f"{head}; {'; '.join(parts)}. Protocol: {protocol}."


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
        note = _note_for(board, e, ref, notes) if agreement is not None else None
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


def text_entries(entries: Sequence[Mapping[str, Any]], readings: Optional[Readings],
                 cells: Sequence[Mapping[str, Any]] = (), ignore: Sequence[str] = ()) -> List[Mapping[str, Any]]:
    """The paper ``entries`` that are the text's reading: a number copied beside an alternative
    reading (``readings``) is not a paper cell of its own.  An entry that names the readings key is
    the text's if its value is; one that does not (keyed by model / norm) unless only cells of
    alternative readings among the suite's ``cells`` match it."""
    if readings is None:
        return list(entries)

    def is_text(e: Mapping[str, Any]) -> bool:
        if readings.key in e:
            return readings.is_text(e[readings.key])
        found = [c for c in cells if entry_matches(e, c["config"], cell_value, lb._norm, ignore)]
        return not found or bool(text_cells(found, readings))
    return [e for e in entries if is_text(e)]


def text_cells(cells: Sequence[Mapping[str, Any]], readings: Optional[Readings]) -> Tuple[Mapping[str, Any], ...]:
    """The suite ``cells`` of the text's reading (all of them where the suite declares no ``readings``)."""
    if readings is None:
        return tuple(cells)
    return tuple(c for c in cells if readings.is_text(cell_value(c["config"], readings.key)))


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


def _shipped_suites() -> Dict[str, Dict[str, Any]]:
    """``{name: {"meta", "reported", "metric"}}`` of the shipped suite files (TOML read, not expanded)."""
    out = {}
    for name in list_suites():
        path = suites_dir() / f"{name}.toml"
        raw = tomllib.loads(path.read_text())
        meta = raw.get("suite") or {}
        reported = load_reported(path.parent / meta["reported"]) if meta.get("reported") else None
        metric = (raw.get("leaderboard") or {}).get("metric", "test")
        try:
            findings = fd.parse_findings((reported or {}).get("findings"), f"benchmarks/suites/{meta.get('reported')}")
        except fd.FindingsError as e:
            raise ReportError(str(e)) from None
        out[normalize_name(meta.get("name", name))] = {"meta": meta, "reported": reported, "metric": metric,
                                                       "keys": _raw_keys(raw), "findings": findings, "path": path,
                                                       "layout": {"metric": metric, "columns": (raw.get("leaderboard")
                                                                  or {}).get("columns", "num_layers")}}
    return out


@functools.lru_cache(maxsize=64)
def _shipped_skeleton(path: str, mtime_ns: int) -> Tuple[lb.Board, Tuple[str, ...]]:
    """The full shipped suite's cells (:func:`zoo.bench.report.findings.skeleton`) and cell keys; cached
    per file version (expanding a suite costs ~0.1-0.5 s, and tests build many reports)."""
    _, info = _shipped_resolved(path, mtime_ns)
    return fd.skeleton(info), tuple(cell_keys(info["leaderboard"], info["cells"]))


@functools.lru_cache(maxsize=64)
def _shipped_cells(path: str, mtime_ns: int) -> Tuple[str, Tuple[Dict[str, Any], ...]]:
    """The full shipped suite's mode and resolved cells (cached per file version)."""
    mode, info = _shipped_resolved(path, mtime_ns)
    return mode, tuple(info["cells"])


@functools.lru_cache(maxsize=64)
def _shipped_resolved(path: str, mtime_ns: int) -> Tuple[str, Dict[str, Any]]:
    """The full shipped suite's mode and resolved form, expanded once per file version for both the
    findings' skeleton and the missing cells' costs (lipschitz_table1 expands to 10k cells)."""
    suite = load_suite(path, validate_models=False)
    return suite.mode, suite.resolved()


def missing_costs(name: str, entries: Sequence[Mapping[str, Any]], shipped: Optional[Mapping[str, Any]],
                  info: Optional[Mapping[str, Any]], recs: Sequence[Mapping[str, Any]],
                  layout: Mapping[str, Any], readings: Optional[Readings] = None
                  ) -> Tuple[List[MissingCell], List[FillCommand]]:
    """Cost and class of paper ``entries`` without records (cells of the full shipped suite, else
    of the records' own suite; of the text's reading only), and one ``zoo bench --where`` command per
    slice filling them; CPU time by the shipped ``cpu`` cost model, GPU time (``gpu_seconds``) by its
    ``cuda`` entry."""
    if not entries:
        return [], []
    if shipped:
        mode, cells = _shipped_cells(str(shipped["path"]), Path(shipped["path"]).stat().st_mtime_ns)
    else:
        mode, cells = (info or {}).get("meta", {}).get("mode", "train"), tuple((info or {}).get("cells", ()))
    done = [r["id"] for r in recs if r.get("status", "ok") == "ok"]
    ignore = ("layer",) if layout.get("metric") == "pruned" else ()
    model, table = shipped_model("cpu"), shipped_table()
    # a suite that stops early runs as long as its slice's finished groups did, not to the cap
    epochs_of = expected_epochs_of(recs, lambda c: tuple(cell_value(c, k) for k in SLICE_KEYS))
    seconds = pending_seconds(name, mode, cells, done, model, table, epochs_of)
    gpu = pending_seconds(name, mode, cells, done, shipped_model("cuda"), table, epochs_of)  # the same cells on one GPU
    # the text's cells fill a paper cell, not the alternatives' beside it (the commands name the text's)
    missing = missing_cells(name, mode, text_cells(cells, readings), entries, done, model, table, cell_value,
                            lb._norm, ignore, seconds, gpu)
    pending = [c for c in cells if c["id"] in seconds]
    return missing, fill_commands(name, missing, cell_value, pending, seconds, ignore=ignore, gpu_seconds=gpu,
                                  narrow=(readings.key,) if readings is not None else ())


def _suite_findings(name: str, shipped: Optional[Mapping[str, Any]], info: Optional[Mapping[str, Any]],
                    board: Optional[lb.Board], notes: Sequence[Note],
                    records: Sequence[Mapping[str, Any]] = ()) -> List[fd.Result]:
    """The findings of suite ``name`` decided on the records' ``board`` (``None``: not run);
    ``records`` give the other splits' accuracies to findings about them (``fd.other_split``).

    A shipped suite's findings come from its shipped file and are validated against the full
    shipped suite (a typo is an error even where the records cover a slice); a suite that is not
    shipped uses the copy stored with its records, validated against the records' suite."""
    origin = f"benchmarks/suites/{(shipped or {}).get('meta', {}).get('reported')}" if shipped \
        else f"{name}/suite.resolved.json"
    try:
        if shipped:
            findings, reported = shipped["findings"], shipped["reported"]
        else:
            reported = (info or {}).get("reported") or {}
            findings = fd.parse_findings(reported.get("findings"), origin)
        if not findings:
            return []
        if shipped:
            full, keys = _shipped_skeleton(str(shipped["path"]), Path(shipped["path"]).stat().st_mtime_ns)
        else:
            full, keys = fd.skeleton(info), tuple(cell_keys(info["leaderboard"], info["cells"]))
        fd.validate(findings, full, keys, origin)
    except fd.FindingsError as e:
        raise ReportError(str(e)) from None
    if board is None:
        results = fd.evaluate(findings, full, {}, reported)
    else:
        numbers = {(e.table, e.row, e.column): e for e in board.entries}
        split_numbers = {}
        for metric in sorted({f.metric for f in findings if fd.other_split(f, board.layout)}):
            other = lb.aggregate({**info, "leaderboard": {**info["leaderboard"], "metric": metric}}, list(records))
            split_numbers[metric] = {(e.table, e.row, e.column): e for e in other.entries}
        results = fd.evaluate(findings, fd.skeleton(info), numbers, reported, paper_board=full,
                              split_numbers=split_numbers)
    for r in results:
        for n in notes:
            if n.suite == name and n.finding == r.finding.id:
                n.used = True
                r.note = n if r.note is None or n.index > r.note.index else r.note
    return results


def _shipped_readings(name: str, reported: Optional[Mapping[str, Any]]) -> Optional[Readings]:
    try:
        return parse_readings((reported or {}).get("readings"), f"benchmarks/suites/reported/{name}.json")
    except ReadingsError as e:
        raise ReportError(str(e)) from None


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
    shipped = _shipped_suites()
    contexts = {name: SuiteContext(_paper_tables(s["meta"], s["reported"]), s["keys"], [f.id for f in s["findings"]])
                for name, s in shipped.items()}
    for name, f in by_suite.items():  # the records' own suite (what was run) wins over the shipped file
        info = infos[f]
        reported = shipped[name]["reported"] if name in shipped and shipped[name]["reported"] else info.get("reported")
        ids = [f.id for f in shipped[name]["findings"]] if name in shipped else \
            [str(f.get("id")) for f in ((info.get("reported") or {}).get("findings") or []) if isinstance(f, dict)]
        contexts[name] = SuiteContext(_paper_tables(info.get("meta", {}), reported),
                                      cell_keys(info["leaderboard"], info["cells"]), ids)
    root = Path(records_dir)
    notes = load_notes(Path(notes_path) if notes_path is not None else default_notes(root), contexts)
    suites = [suite_report(f, notes, shipped[name]["reported"] if name in shipped else None,
                           shipped[name]["metric"] if name in shipped else None)
              for name, f in sorted(by_suite.items())]
    for s in suites:
        name = normalize_name(str(s.info.get("name")))
        s.findings = _suite_findings(name, shipped.get(name), s.info, s.board, notes, s.records)
        s.missing, s.fill = missing_costs(name, s.unmatched, shipped.get(name), s.info, s.records, s.board.layout,
                                          s.readings)
    unrun = []
    for name, s in sorted(shipped.items()):
        if name in by_suite:
            continue
        all_entries = [e for e in (s["reported"] or {}).get("entries", []) if e.get("metric", s["metric"]) == s["metric"]]
        readings = _shipped_readings(name, s["reported"])
        cells = _shipped_cells(str(s["path"]), Path(s["path"]).stat().st_mtime_ns)[1] if readings else ()
        entries = text_entries(all_entries, readings, cells, ("layer",) if s["metric"] == "pruned" else ())
        per_table: Dict[str, int] = {}
        for e in entries:
            per_table[str(e["table"])] = per_table.get(str(e["table"]), 0) + 1
        missing, fill = missing_costs(name, entries, s, None, [], s["layout"], readings)
        unrun.append({"suite": name, "title": s["meta"].get("title", name), "cells": len(entries),
                      "alternatives_not_run": len(all_entries) - len(entries),
                      "tables": per_table, "findings": _suite_findings(name, s, None, None, notes),
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


def shipped_notes(records_dir: PathLike) -> List[Note]:
    """The notes file beside ``records_dir``, read against the shipped suites (for a caller that
    decides some cells' statuses without building the whole report)."""
    contexts = {name: SuiteContext(_paper_tables(s["meta"], s["reported"]), s["keys"], [f.id for f in s["findings"]])
                for name, s in _shipped_suites().items()}
    return load_notes(default_notes(Path(records_dir)), contexts)


def default_notes(records_dir: Path) -> Path:
    base = records_dir.parent if (records_dir / RESOLVED_FILE).is_file() else records_dir
    return base.parent / NOTES_FILE
