"""The reproduction report: committed run records beside the papers' numbers, a status per cell.

``zoo report [RECORDS_DIR]`` reads every record folder under ``RECORDS_DIR`` (default
``docs/reproduction/records``; each a ``zoo bench`` output folder: ``results.jsonl`` +
``suite.resolved.json``), builds its suite's leaderboard (:mod:`zoo.bench.leaderboard`) and
writes ``docs/reproduction.md`` (deterministic: stable order, no timestamps, so it can be diffed
and checked by a test) and ``docs/reproduction/index.html`` (the same tables as a page with plots).

Status of a cell that has a paper number (:func:`cell_status`):

* *reproduced* — accuracies (%): the paper's value lies inside our mean ± 95 % CI; where a CI is
  missing on either side (ours: n = 1; the paper's: not stored) ``|Δ| ≤ 1`` point also counts.
  Energies (log-normal over seeds, compared in log10): the paper's value lies inside the 95 % CI
  of our geometric mean (Student t on log10, in decades); with n = 1, ``|Δlog10| ≤ 0.5`` (a
  factor of √10).
* *differs — explained* — not reproduced, and the notes file gives the measured cause
  (``status = "differs"``).
* *open* — not reproduced and not explained; the notes file must say what was tried
  (``status = "open"``), else the report is refused (:class:`MissingNotesError`).

Notes file (``docs/reproduction/notes.toml``)::

    [[note]]
    suite = "balance_table2"                        # a suite name (required)
    table = "Table 2"                                # optional: the paper's table reference
    when = { dataset = "cornell_npz", num_layers = 10, init = "bal_x" }   # optional cell selector
    status = "open"                                  # "open" or "differs"
    note = "what was tried / the measured cause"

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
95 % CIs; :mod:`zoo.bench.findings` has the exact rules): *holds (significant)*, *holds*,
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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import close_matches, normalize_name, unknown_name_error
from zoo.bench import findings as fd
from zoo.bench import leaderboard as lb
from zoo.bench.readings import Readings, ReadingsError, parse_readings

PathLike = Union[str, Path]
REPO = Path(__file__).resolve().parents[2]
DEFAULT_RECORDS = "docs/reproduction/records"
DEFAULT_MD = "docs/reproduction.md"
DEFAULT_HTML = "docs/reproduction/index.html"
NOTES_FILE = "notes.toml"  # next to the records folder: docs/reproduction/notes.toml
COMMAND = f"zoo report {DEFAULT_RECORDS} --md {DEFAULT_MD} --html {DEFAULT_HTML}"

REPRODUCED, DIFFERS, OPEN, NO_PAPER = "reproduced", "differs — explained", "open", "—"
#: a cell beside a paper number that is not the text's reading (zoo.bench.readings): shown, no status
ALTERNATIVE = "alternative reading"
STATUSES = (REPRODUCED, DIFFERS, OPEN)
NOTE_STATUS = {"differs": DIFFERS, "open": OPEN}
NOTE_KEYS = ("suite", "table", "when", "finding", "status", "note")
#: |Δ| (points) that counts as reproduced where a CI is missing; |Δlog10| (decades) for one energy run.
POINTS_TOLERANCE = 1.0
DECADES_TOLERANCE = 0.5
MISSING_NOTE = "NO NOTE YET (zoo report --draft): add one to notes.toml"
_EPS = 1e-9  # paper values are rounded decimals: a boundary value counts as inside


class ReportError(ValueError):
    """A record folder or the notes file cannot make a report; the message names the fix."""


class MissingNotesError(ReportError):
    """Some *open* cells have no note saying what was tried."""


# --------------------------------------------------------------------------- status rules


def cell_status(entry: lb.Entry, log_metric: bool) -> Optional[bool]:
    """Whether ``entry`` reproduces its paper number (``None``: no paper number to compare)."""
    if entry.reported is None:
        return None
    s = entry.summary
    if s.mean is None:
        return False
    paper = float(entry.reported["value"])
    if log_metric:
        if paper <= 0:
            return False
        delta = abs(math.log10(s.mean) - math.log10(paper))
        # The analogue of the accuracy rule in log10: the paper's value inside the 95 % CI of our
        # geometric mean.  Not the min-max range: energies at init spread over 3-6 decades across
        # seeds, and a range that wide would call a 2-decade gap "reproduced".
        if s.n >= 2 and s.ci95 is not None:
            return delta <= s.ci95 + _EPS
        return delta <= DECADES_TOLERANCE + _EPS
    diff = s.mean - paper
    if s.ci95 is not None and abs(diff) <= s.ci95 + _EPS:
        return True
    paper_ci = entry.reported.get("ci95")
    return (s.ci95 is None or paper_ci is None) and abs(diff) <= POINTS_TOLERANCE + _EPS


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
    finding: Optional[str] = None  # the id of a finding (zoo.bench.findings) this note explains, not cells

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
    from zoo.bench.suite import tomllib

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
        notes.append(Note(suite, NOTE_STATUS[status], item["note"].strip(), table, when, i, finding=finding))
    return notes


# --------------------------------------------------------------------------- the report


@dataclass
class Row:
    """One cell of a report table."""

    entry: lb.Entry
    ref: str  # the paper's table reference ("" without a paper number)
    status: str
    note: Optional[Note] = None
    explanation: str = ""  # shown where there is no note (an alternative reading: why it has no status)


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

    @property
    def wall_time_s(self) -> float:
        return sum(float(r.get("wall_time_s") or 0.0) for r in self.records)

    def coverage(self) -> str:
        """Per paper table: how many of its cells were run, with how many runs each."""
        run: Dict[str, List[int]] = {}
        for rows in self.rows.values():
            for r in rows:
                if r.ref:
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

    def findings(self) -> List[Tuple[str, fd.Result]]:
        """``(suite, result)`` of every finding: suites with records first, then those not run."""
        return [(s.board.suite, r) for s in self.suites for r in s.findings] + \
            [(u["suite"], r) for u in self.unrun for r in u.get("findings", [])]

    def finding_counts(self) -> Dict[str, int]:
        return finding_counts(r for _, r in self.findings())

    def missing_finding_notes(self) -> List[Tuple[str, fd.Result]]:
        """Contradicted findings without a note (``finding = "<id>"``) giving the cause or what was tried."""
        return [(s, r) for s, r in self.findings() if r.verdict == fd.CONTRADICTED and r.note is None]

    def counts(self) -> Dict[str, int]:
        out = {s: 0 for s in STATUSES}
        out["not run"] = sum(sum(s.not_run.values()) for s in self.suites) + sum(u["cells"] for u in self.unrun)
        out["no paper number"] = 0
        out[ALTERNATIVE] = 0
        for s in self.suites:
            for rows in s.rows.values():
                for r in rows:
                    out[r.status if r.status != NO_PAPER else "no paper number"] += 1
        return out

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
    from zoo.bench.records import RESOLVED_FILE

    root = Path(records_dir)
    if not root.is_dir():
        raise ReportError(f"records folder {root} does not exist; pass the folder holding the run records "
                          f"(default {DEFAULT_RECORDS}, from the repository root)")
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
    from zoo.bench.suite import PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS

    return set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)


def _cell_keys(layout: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> List[str]:
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
    from zoo.bench.suite import describe_settings

    if not recs:
        return f"**no runs yet** — none of the {'--quick form' if info.get('quick') else 'suite'}'s " \
               f"{len(info['cells'])} runs is recorded."
    lay = info["leaderboard"]
    keys = [k for k in (lay.get("table_by"), *lay["rows"], lay["columns"] if lay["metric"] != "pruned" else None,
                        *((info.get("selection") or {}).get("where") or {}), "seed") if k]
    keys = list(dict.fromkeys(keys))
    parts = []
    full_scale = len(recs) == len(info["cells"])
    for key in keys:
        suite_vals: Dict[str, Any] = {}
        for c in info["cells"]:
            v = lb.cell_value(c["config"], key)
            suite_vals.setdefault(fd.value_key(v), v)
        ran = {fd.value_key(lb.cell_value(r["config"], key)) for r in recs}
        if len(suite_vals) < 2 and key != "seed":
            continue
        order = sorted(suite_vals, key=lambda k: lb._sort_key(suite_vals[k]))
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
    folder, info, recs, dropped = lb.read_folder(folder)
    stale = reported is not None and reported.get("entries") != (info.get("reported") or {}).get("entries")
    if reported is not None:
        info = {**info, "reported": reported}
    if metric is not None and metric != info["leaderboard"]["metric"]:
        info = {**info, "leaderboard": {**info["leaderboard"], "metric": metric}}
    board = lb.aggregate(info, recs)
    board.dropped = dropped
    log_metric = lb.is_log_metric(board)
    readings = _readings(info)
    rows: Dict[Any, List[Row]] = {}
    for e in board.entries:
        ok = cell_status(e, log_metric)
        ref = str(e.reported["table"]) if e.reported is not None else ""
        reading = None if readings is None else fd.entry_value(board, e, readings.key)
        if ok is not None and readings is not None and not readings.is_text(reading):
            rows.setdefault(e.table, []).append(Row(e, ref, ALTERNATIVE, None, readings.explanation(reading)))
            continue
        note = _note_for(board, e, ref, notes) if ok is not None else None
        status = NO_PAPER if ok is None else REPRODUCED if ok else (note.status if note else OPEN)
        rows.setdefault(e.table, []).append(Row(e, ref, status, note))
    matched = {id(e.reported) for e in board.entries if e.reported is not None}
    not_run: Dict[str, int] = {}
    other = 0
    for r in (info.get("reported") or {}).get("entries", []):
        if r.get("metric", board.layout["metric"]) != board.layout["metric"]:
            other += 1
        elif id(r) not in matched:
            not_run[str(r["table"])] = not_run.get(str(r["table"]), 0) + 1
    ns = sorted({e.summary.n for e in board.entries})
    scale = describe_scale(info, recs)
    if ns:
        scale += f" Runs per table cell: {ns[0]}" + (f"–{ns[-1]}" if ns[-1] != ns[0] else "") + "."
    return SuiteReport(folder, board, info, recs, rows, scale, not_run, other, stale)


def _readings(info: Mapping[str, Any]) -> Optional[Readings]:
    """The text's reading declared by the suite's reported file (``None``: every cell is the text's)."""
    reported = info.get("reported") or {}
    origin = f"benchmarks/suites/{info.get('meta', {}).get('reported')}"
    try:
        readings = parse_readings(reported.get("readings"), origin)
    except ReadingsError as e:
        raise ReportError(str(e)) from None
    if readings is not None:
        keys = _cell_keys(info["leaderboard"], info["cells"])
        if readings.key not in keys:
            raise ReportError(f"{origin}: readings.key {readings.key!r} is not a cell key of suite {info.get('name')!r}"
                              + (f" (did you mean {' or '.join(map(repr, close_matches(readings.key, keys)))}?)"
                                 if close_matches(readings.key, keys) else "") + f". Cell keys: {', '.join(keys)}.")
        have = {fd.value_key(lb.cell_value(c["config"], readings.key)) for c in info["cells"]}
        unknown = [v for v in readings.text if fd.value_key(v) not in have]
        if unknown:
            raise ReportError(f"{origin}: readings.text value(s) {', '.join(map(repr, unknown))} are not "
                              f"{readings.key} values of any cell; fix the spelling")
    return readings


def _shipped_suites() -> Dict[str, Dict[str, Any]]:
    """``{name: {"meta", "reported", "metric"}}`` of the shipped suite files (TOML read, not expanded)."""
    from zoo.bench.suite import list_suites, load_reported, suites_dir, tomllib

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
    """The full shipped suite's cells (:func:`zoo.bench.findings.skeleton`) and cell keys; cached
    per file version (expanding a suite costs ~0.1-0.5 s, and tests build many reports)."""
    from zoo.bench.suite import load_suite

    info = load_suite(path, validate_models=False).resolved()
    return fd.skeleton(info), tuple(_cell_keys(info["leaderboard"], info["cells"]))


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
            full, keys = fd.skeleton(info), tuple(_cell_keys(info["leaderboard"], info["cells"]))
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


def build_report(records_dir: PathLike, notes_path: Optional[PathLike] = None) -> Report:
    """Read every record folder under ``records_dir`` and the notes (default: ``records_dir/../notes.toml``)."""
    from zoo.bench.records import read_resolved

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
                                      _cell_keys(info["leaderboard"], info["cells"]), ids)
    root = Path(records_dir)
    notes = load_notes(Path(notes_path) if notes_path is not None else _default_notes(root), contexts)
    suites = [suite_report(f, notes, shipped[name]["reported"] if name in shipped else None,
                           shipped[name]["metric"] if name in shipped else None)
              for name, f in sorted(by_suite.items())]
    for s in suites:
        name = normalize_name(str(s.info.get("name")))
        s.findings = _suite_findings(name, shipped.get(name), s.info, s.board, notes, s.records)
    unrun = []
    for name, s in sorted(shipped.items()):
        if name in by_suite:
            continue
        entries = [e for e in (s["reported"] or {}).get("entries", []) if e.get("metric", s["metric"]) == s["metric"]]
        per_table: Dict[str, int] = {}
        for e in entries:
            per_table[str(e["table"])] = per_table.get(str(e["table"]), 0) + 1
        unrun.append({"suite": name, "title": s["meta"].get("title", name), "cells": len(entries),
                      "tables": per_table, "findings": _suite_findings(name, s, None, None, notes),
                      "layout": s["layout"]})
    return Report(suites, unrun, notes)


def _default_notes(records_dir: Path) -> Path:
    from zoo.bench.records import RESOLVED_FILE

    base = records_dir.parent if (records_dir / RESOLVED_FILE).is_file() else records_dir
    return base.parent / NOTES_FILE


# --------------------------------------------------------------------------- rendering


def _display_path(path: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), REPO)).as_posix() if path.resolve().is_relative_to(REPO) \
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
    return [
        f"- **{REPRODUCED}**: accuracies (%) — the paper's value lies inside our mean ± 95 % CI (Student t over "
        "seeds); where a CI is missing (ours with n = 1, or the paper's not stored) "
        f"|Δ| ≤ {POINTS_TOLERANCE:g} point also counts. Energies (log-normal over seeds, compared in log10) — "
        "the paper's value lies inside the 95 % CI of our geometric mean (Student t on log10, in decades); "
        f"with n = 1, |Δlog10| ≤ {DECADES_TOLERANCE:g} decade.",
        f"- **{DIFFERS}**: not reproduced; the note gives the measured cause.",
        f"- **{OPEN}**: not reproduced and not explained yet; the note says what was tried.",
        f"- **not run**: a paper number whose cell has no record yet. `{NO_PAPER}`: our cell has no paper number.",
        f"- **{ALTERNATIVE}**: a cell beside a paper number that its suite does not declare as the text's reading "
        "(`readings` in the reported file, e.g. the nonlocal energy factors other than §4.1's 1/n): shown with its Δ, "
        "no status, not counted.",
    ]


def to_markdown(report: Report) -> str:
    counts = report.counts()
    runs = sum(len(s.records) for s in report.suites)
    wall = sum(s.wall_time_s for s in report.suites)
    lines = ["# Reproduction report", "",
             "<!-- Generated by `zoo report` from docs/reproduction/records and docs/reproduction/notes.toml;"
             " do not edit by hand. -->", "",
             f"Regenerate: `{COMMAND}` (from the repository root); `zoo report --check` fails if this page is out "
             "of date or an open row has no note. Records: `docs/reproduction/records/<suite>/` (`zoo bench` output "
             "folders); notes: `docs/reproduction/notes.toml`; the paper's numbers: "
             "`benchmarks/suites/reported/*.json`.", "",
             "## Summary", "",
             "| " + " | ".join([*STATUSES, "not run"]) + " |", "|" + "---|" * (len(STATUSES) + 1),
             "| " + " | ".join(str(counts[k]) for k in (*STATUSES, "not run")) + " |", ""]
    fc = report.finding_counts()
    if sum(fc.values()):
        lines += ["Findings (the papers' claims about figures and tables, decided on our cells; "
                  "[rules](#findings-rules)):", "",
                  "| held | of them significant | contradicted | inconclusive | not run |", "|---|---|---|---|---|",
                  "| " + " | ".join(str(fc[k]) for k in FINDING_COUNTS) + " |", ""]
    if counts["no paper number"]:
        lines += [f"Our cells without a paper number: {counts['no paper number']}.", ""]
    if counts[ALTERNATIVE]:
        lines += [f"Alternative readings (cells beside a paper number that the suite does not declare as the "
                  f"text's reading; shown with Δ, no status, not counted above): {counts[ALTERNATIVE]}.", ""]
    lines += [f"Compute: {_hours(wall)} of run wall time (sum over the records' `wall_time_s`), {runs} runs in "
              f"{len(report.suites)} record folder(s). Machine(s): {', '.join(_machines(report)) or '(none)'}.", "",
              "Status rules:", "", *rules_text(), "", '<a id="findings-rules"></a>Findings rules '
              "(`zoo/bench/findings.py`):", "", *findings_rules_text(), ""]
    if report.suites:
        lines += ["| suite | scale | runs | compute | reproduced | differs | open | paper cells not run | "
                  "findings held / contradicted / inconclusive / not run |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for s in report.suites:
            c = _suite_counts(s)
            lines.append(f"| [{s.board.suite}](#{_anchor(s.board.suite)}) | {s.scale.split(' — ')[0].strip('*')} | "
                         f"{len(s.records)} | {_hours(s.wall_time_s)} | {c[REPRODUCED]} | {c[DIFFERS]} | {c[OPEN]} | "
                         f"{sum(s.not_run.values())} | {_finding_counts_text(s.findings)} |")
        lines.append("")
    for s in report.suites:
        lines += _suite_markdown(s)
    if report.unrun:
        lines += ["## Suites not run yet", "", "| suite | paper tables | paper cells | findings |", "|---|---|---|---|"]
        for u in report.unrun:
            tables = ", ".join(f"{t} ({n})" for t, n in u["tables"].items()) or "(no paper numbers stored)"
            lines.append(f"| `{u['suite']}` | {_cell(tables)} | {u['cells']} | {len(u['findings'])} |")
        lines.append("")
        for u in report.unrun:
            if u["findings"]:
                lines += [f"### {u['suite']}: findings (not run)", "", *_findings_markdown(u["findings"], u["layout"])]
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
        return r.note.text
    return MISSING_NOTE if r.status == OPEN else r.explanation


def _suite_markdown(s: SuiteReport) -> List[str]:
    b, meta = s.board, s.board.meta
    commits = ", ".join(c[:7] for c in b.provenance["commits"])
    lines = [f"## {b.suite}", "", f"**{meta.get('title') or b.suite}**", ""]
    if meta.get("paper"):
        lines.append(f"Paper: {meta['paper']}" + (f" — {', '.join(meta['tables'])}" if meta.get("tables") else "")
                     + (f" (numbers: `benchmarks/suites/{meta['reported']}`)" if meta.get("reported") else "") + ".")
    lines += ["", f"Scale: {s.scale}", ""]
    if s.coverage():
        lines += [f"Paper's cells: {s.coverage()}.", ""]
    lines += [
              (f"Records: `{_display_path(s.folder)}` — {len(s.records)} runs, {_hours(s.wall_time_s)} on "
               f"{', '.join(b.provenance['devices'])}; commit(s) {commits}; "
               + ", ".join(f"{k} {v}" for k, v in b.provenance.get("versions", {}).items())
               + f". Full leaderboard (CSV/JSON/HTML): `zoo leaderboard {_display_path(s.folder)} --out DIR`."
               if s.records else f"Records: `{_display_path(s.folder)}` — no finished run yet."), "",
              lb.metric_description(b), ""]
    if b.dropped:
        lines += [f"Note: {lb.dropped_note(b)}.", ""]
    if s.reported_changed:
        lines += ["The paper's numbers were edited since these records were made; the current "
                  f"`benchmarks/suites/{meta.get('reported', 'reported/')}` is used.", ""]
    lay = b.layout
    head = [*lay["rows"], lay["columns"], "ours", "paper", lb.diff_label(b), "status", "note"]
    for table, rows in s.rows.items():
        refs = sorted({r.ref for r in rows if r.ref})
        title = f"{lay['table_by']} = {table}" if lay.get("table_by") else "results"
        lines += [f"### {b.suite}: {title}" + (f" ({', '.join(refs)})" if refs else ""), ""]
        many = len(refs) > 1
        h = head[:-4] + (["paper table"] if many else []) + head[-4:]
        lines += ["| " + " | ".join(h) + " |", "|" + "---|" * len(h)]
        # A note usually covers many cells: print it once under the table, cite it in the rows.
        numbered: Dict[str, int] = {}
        for r in rows:
            text = _note_text(r)
            if text and text != MISSING_NOTE:
                numbered.setdefault(text, len(numbered) + 1)
        for r in rows:
            e = r.entry
            ours = lb.fmt(e.summary) + (f" ⚠{e.diverged} diverged" if e.diverged else "")
            cells = [*map(str, e.row), str(e.column), ours]
            if many:
                cells.append(r.ref)
            text = _note_text(r)
            cells += [fmt_paper(b, e.reported) if e.reported else "", lb.fmt_diff(b, e.diff), r.status,
                      f"[{numbered[text]}]" if text in numbered else text]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
        lines += [f"[{i}] {_cell(text)}" + ("  " if i < len(numbered) else "") for text, i in numbered.items()]
        if numbered:
            lines.append("")
    if s.other_metric:
        lines += [f"{s.other_metric} paper number(s) of another metric are not compared (this suite's leaderboard "
                  f"shows {lay['metric']}).", ""]
    if s.findings:
        lines += [f"### {b.suite}: findings", "", *_findings_markdown(s.findings, lay)]
    return lines


def _plain(markdown: str) -> str:
    """Markdown emphasis and code marks dropped (the page's text is escaped, not rendered)."""
    return markdown.replace("**", "").replace("`", "")


def to_html(report: Report) -> str:
    """The report as a self-contained page: summary, status tables and the leaderboard plots."""
    import html as h

    from zoo.bench.html import _slug, page, plots

    counts = report.counts()
    body = [f"<p>Generated by <code>{h.escape(COMMAND)}</code> from the committed run records "
            "(<code>docs/reproduction/records/</code>) and notes (<code>docs/reproduction/notes.toml</code>); "
            "the same tables as <code>docs/reproduction.md</code>. Do not edit by hand.</p>",
            "<table><thead><tr>" + "".join(f"<th>{h.escape(k)}</th>" for k in (*STATUSES, "not run"))
            + "</tr></thead><tbody><tr>" + "".join(f"<td>{counts[k]}</td>" for k in (*STATUSES, "not run"))
            + "</tr></tbody></table>",
            f"<p>Compute: {h.escape(_hours(sum(s.wall_time_s for s in report.suites)))}, "
            f"{sum(len(s.records) for s in report.suites)} runs. Machine(s): "
            f"{h.escape(', '.join(_machines(report)) or '(none)')}.</p>",
            "<ul>" + "".join(f"<li>{h.escape(_plain(r[2:]))}</li>" for r in rules_text()) + "</ul>"]
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
        sid = _slug(b.suite)
        body.append(f'<h2 id="{sid}"><a href="#{sid}">{h.escape(b.suite)}</a>: '
                    f"{h.escape(b.meta.get('title') or '')}</h2>")
        body.append(f"<p>Scale: {h.escape(_plain(s.scale))}</p>")
        if s.coverage():
            body.append(f"<p>Paper's cells: {h.escape(s.coverage())}.</p>")
        body.append(f"<p class=muted>{h.escape(_plain(lb.metric_description(b)))} Records "
                    f"<code>{h.escape(_display_path(s.folder))}</code>, {len(s.records)} runs, "
                    f"{h.escape(_hours(s.wall_time_s))}; commit(s) "
                    f"{h.escape(', '.join(c[:7] for c in b.provenance['commits']))}.</p>")
        for table, t in lb.tables(b).items():
            rows = s.rows[table]
            tid = _slug(b.suite, table)
            refs = sorted({r.ref for r in rows if r.ref})
            title = f"{lay['table_by']} = {table}" if lay.get("table_by") else "results"
            body.append(f'<h3 id="{tid}"><a href="#{tid}">{h.escape(title)}</a> {h.escape(", ".join(refs))}</h3>')
            head = [*lay["rows"], lay["columns"], "ours", "paper", lb.diff_label(b), "status", "note"]
            body.append('<table class="sortable"><thead><tr>' + "".join(f"<th>{h.escape(str(k))}</th>" for k in head)
                        + "</tr></thead><tbody>")
            for r in rows:
                e = r.entry
                v = "" if e.summary.mean is None else f"{e.summary.mean:.6g}"
                cls = {REPRODUCED: "pos", OPEN: "neg"}.get(r.status, "")
                tds = "".join(f'<td class="k">{h.escape(str(x))}</td>' for x in (*e.row, e.column))
                tds += f'<td data-v="{v}">{h.escape(lb.fmt(e.summary))}</td>'
                tds += f"<td>{h.escape(fmt_paper(b, e.reported)) if e.reported else ''}</td>"
                tds += f"<td>{h.escape(lb.fmt_diff(b, e.diff))}</td>"
                tds += f'<td class="{cls}">{h.escape(r.status)}</td>'
                tds += f'<td style="text-align:left">{h.escape(_note_text(r))}</td>'
                body.append(f"<tr>{tds}</tr>")
            body.append("</tbody></table>")
            body.append(plots(b, table, t))
        if s.findings:
            body.append(f"<h3>{h.escape(b.suite)}: findings</h3>" + _findings_html(s.findings, lay))
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
    nav = " ".join(f'<a href="#{_slug(s.board.suite)}">{h.escape(s.board.suite)}</a>' for s in report.suites)
    return page("gat-zoo reproduction report", "\n".join(body), nav)


def _findings_html(results: Sequence[fd.Result], layout: Mapping[str, Any]) -> str:
    import html as h

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


def generate(records_dir: PathLike = DEFAULT_RECORDS, md: Optional[PathLike] = DEFAULT_MD,
             html_path: Optional[PathLike] = DEFAULT_HTML, notes_path: Optional[PathLike] = None,
             check: bool = False, draft: bool = False) -> Tuple[Report, List[str]]:
    """Build the report; write ``md``/``html_path`` (atomically), or with ``check`` compare the
    Markdown with ``md`` on disk.  Returns the report and the problems found (``check``: an
    out-of-date page; ``draft``: open cells without a note).  Open cells without a note raise
    :class:`MissingNotesError` and nothing is written — unless ``draft``, which writes the pages
    with those rows marked ``NO NOTE YET`` (to see the numbers before writing the notes)."""
    from zoo.bench.runner import write_atomic

    notes_path = Path(notes_path) if notes_path is not None else _default_notes(Path(records_dir))
    report = build_report(records_dir, notes_path)
    problems = []
    if report.missing_notes() or report.missing_finding_notes():
        if check or not draft:
            raise MissingNotesError(missing_notes_message(report, str(notes_path)))
        problems.append(missing_notes_message(report, str(notes_path)))
    text = to_markdown(report)
    if check:
        if md is not None:
            on_disk = Path(md).read_text() if Path(md).is_file() else None
            if on_disk != text:
                problems.append(f"{md} is {'missing' if on_disk is None else 'out of date'} with respect to the "
                                f"records and notes; regenerate it with `{COMMAND}` and commit it")
        return report, problems
    if md is not None:
        Path(md).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(md), text)
    if html_path is not None:
        Path(html_path).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(Path(html_path), to_html(report))
    return report, problems
