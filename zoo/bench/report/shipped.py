"""The shipped suites as the reproduction report reads them: their reported numbers, findings and
metric (a corrected transcription reaches the page without a re-run), their full cells (what the
cells not run cost, and the commands that fill them), and the findings decided on the records."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import normalize_name
from zoo._toml import tomllib
from zoo.bench.analyze import board as lb
from zoo.bench.plan.cost import shipped_table
from zoo.bench.plan.cost_file import shipped_model
from zoo.bench.plan.estimate import expected_epochs_of
from zoo.bench.report import findings as fd
from zoo.bench.report.errors import ReportError
from zoo.bench.report.missing_cost import (SLICE_KEYS, FillCommand, MissingCell, absent_datasets, fill_commands,
                                           missing_cells, pending_seconds)
from zoo.bench.report.notes import Note, SuiteContext, cell_keys, default_notes, load_notes, paper_tables, raw_keys
from zoo.bench.report.readings import Readings, ReadingsError, parse_readings, text_cells
from zoo.bench.suite.cells import cell_value
from zoo.bench.suite.load import list_suites, load_suite, suites_dir
from zoo.bench.suite.reported import load_reported

PathLike = Union[str, Path]


def suites() -> Dict[str, Dict[str, Any]]:
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
                                                       "keys": raw_keys(raw), "findings": findings, "path": path,
                                                       "layout": {"metric": metric, "columns": (raw.get("leaderboard")
                                                                  or {}).get("columns", "num_layers")}}
    return out


@functools.lru_cache(maxsize=64)
def skeleton(path: str, mtime_ns: int) -> Tuple[lb.Board, Tuple[str, ...]]:
    """The full shipped suite's cells (:func:`zoo.bench.report.findings.skeleton`) and cell keys; cached
    per file version (expanding a suite costs ~0.1-0.5 s, and tests build many reports)."""
    _, info = _resolved(path, mtime_ns)
    return fd.skeleton(info), tuple(cell_keys(info["leaderboard"], info["cells"]))


@functools.lru_cache(maxsize=64)
def suite_cells(path: str, mtime_ns: int) -> Tuple[str, Tuple[Dict[str, Any], ...]]:
    """The full shipped suite's mode and resolved cells (cached per file version)."""
    mode, info = _resolved(path, mtime_ns)
    return mode, tuple(info["cells"])


@functools.lru_cache(maxsize=64)
def _resolved(path: str, mtime_ns: int) -> Tuple[str, Dict[str, Any]]:
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
    ``cuda`` entry; a cell whose raw data the records' machine's mirror lacks is *data absent here*
    (:func:`absent_datasets`)."""
    if not entries:
        return [], []
    if shipped:
        mode, cells = suite_cells(str(shipped["path"]), Path(shipped["path"]).stat().st_mtime_ns)
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
    pending = [c for c in cells if c["id"] in seconds]
    absent = absent_datasets(pending, table)
    missing = missing_cells(name, mode, text_cells(cells, readings), entries, done, model, table, cell_value,
                            lb._norm, ignore, seconds, gpu, absent)
    return missing, fill_commands(name, missing, cell_value, pending, seconds, ignore=ignore, gpu_seconds=gpu,
                                  narrow=(readings.key,) if readings is not None else (), absent=absent)


def suite_findings(name: str, shipped: Optional[Mapping[str, Any]], info: Optional[Mapping[str, Any]],
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
            full, keys = skeleton(str(shipped["path"]), Path(shipped["path"]).stat().st_mtime_ns)
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


def text_readings(name: str, reported: Optional[Mapping[str, Any]]) -> Optional[Readings]:
    try:
        return parse_readings((reported or {}).get("readings"), f"benchmarks/suites/reported/{name}.json")
    except ReadingsError as e:
        raise ReportError(str(e)) from None


def notes(records_dir: PathLike) -> List[Note]:
    """The notes file beside ``records_dir``, read against the shipped suites (for a caller that
    decides some cells' statuses without building the whole report)."""
    contexts = {name: SuiteContext(paper_tables(s["meta"], s["reported"]), s["keys"], [f.id for f in s["findings"]])
                for name, s in suites().items()}
    return load_notes(default_notes(Path(records_dir)), contexts)
