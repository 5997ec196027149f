"""Reading a results folder written by ``zoo bench``: its resolved suite, kept records and extras."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from zoo.bench.store import records

PathLike = Union[str, Path]
SKIPPED_FILE = "skipped.json"


def read_folder(results: PathLike) -> Tuple[Path, Dict[str, Any], List[Dict[str, Any]], Dict[str, int]]:
    """``(folder, resolved suite, kept records, dropped counts)`` of one results folder.

    Only records whose ``id`` is a cell of the folder's resolved suite are kept; a second record
    with an id already seen (a duplicated line, a re-imported log) and failed runs are dropped.
    """
    results = Path(results)
    if not results.exists():
        raise FileNotFoundError(f"results folder {results} does not exist; pass a folder written by `zoo bench`")
    if not results.is_dir() and results.name != records.RESULTS_FILE:
        raise FileNotFoundError(f"{results} is a file, not a results folder; pass a folder written by `zoo bench` "
                                f"(or the {records.RESULTS_FILE} in it)")
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


def read_skipped(folder: PathLike) -> Dict[str, str]:
    """``{cell id: reason}`` of the cells a run skipped (``skipped.json``; empty without one)."""
    skipped = Path(folder) / SKIPPED_FILE
    if not skipped.is_file():
        return {}
    try:
        return json.loads(skipped.read_text())
    except ValueError as e:
        raise records.CorruptRecordsError(f"{skipped} is corrupt ({e}); delete it (the next run rewrites it)") from None
