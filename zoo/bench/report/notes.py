"""The notes file of the reproduction report (``docs/reproduction/notes.toml``): why a cell differs,
what was tried where it is open, what the paper leaves out where it is underspecified, and the cause
of a contradicted finding.  See :mod:`zoo.bench.report.status` for the file's form; the statuses a
note gives are defined here (a cell is *reproduced* or *too noisy to tell* by its numbers alone)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import close_matches, normalize_name, unknown_name_error
from zoo._toml import tomllib
from zoo.bench.analyze import board as lb
from zoo.bench.report import findings as fd
from zoo.bench.report.errors import ReportError
from zoo.bench.store.records import RESOLVED_FILE
from zoo.bench.suite.schema import PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS

PathLike = Union[str, Path]
DIFFERS, OPEN = "differs — explained", "open"
#: the paper does not define the protocol behind its number: no run can settle the cell
UNDERSPECIFIED = "underspecified"
NOTE_STATUS = {"differs": DIFFERS, "open": OPEN, "underspecified": UNDERSPECIFIED}
NOTES_FILE = "notes.toml"  # next to the records folder: docs/reproduction/notes.toml
NOTE_KEYS = ("suite", "table", "when", "finding", "status", "note", "leaves_out")
LEAVES_OUT_KEYS = ("choice", "sensitivity")


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


def note_for(board: lb.Board, entry: lb.Entry, ref: str, notes: Sequence[Note]) -> Optional[Note]:
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


def raw_keys(raw: Mapping[str, Any]) -> List[str]:
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


def paper_tables(meta: Mapping[str, Any], reported: Optional[Mapping[str, Any]]) -> List[str]:
    tables = [str(t) for t in meta.get("tables") or []]
    for e in (reported or {}).get("entries", []):
        if str(e["table"]) not in tables:
            tables.append(str(e["table"]))
    return tables


def default_notes(records_dir: Path) -> Path:
    base = records_dir.parent if (records_dir / RESOLVED_FILE).is_file() else records_dir
    return base.parent / NOTES_FILE
