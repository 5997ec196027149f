"""Re-key run records whose config writes a split in another form than the canonical one.

A cell's config writes each split of the data one way (:func:`zoo.bench.suite.resolve.canonical_split`), so
``zoo.fit("gat", "minesweeper")`` and ``zoo.fit("gat", "minesweeper", split=0)`` are one cell: a dataset of
ten stored splits says which one ran (``split: 0``, where "no split given" used to write ``null``), and a
dataset's own named split is ``null`` (where ``split = "per_class"`` on a Shchur et al. set, or ``"public"``
on Planetoid, used to be written out).  Records made before hold the old form, and their cell ids hash it.

This rewrites, in every results folder given or found below a folder given, the split of each config that is
not canonical and the ids hashed from that config: in ``results.jsonl`` the record's ``config.task.split``,
``id`` and ``group`` (a group that was not its config's hash, as after an earlier re-keying, is left as it
was), in ``suite.resolved.json`` each cell's config, ``id`` and ``group``, and the keys of ``skipped.json``.
Everything else stays byte for byte (each file keeps its JSON layout).  A folder a runner holds
(``suite.lock``) is refused; so is one whose re-keyed records name weight files (their headers hold the
id).  Running it again changes nothing, so a folder that got more records from older code (a queue that
ran on) is brought up to date by running it again:

    python research/rekey_split.py docs/reproduction/records [MORE_FOLDERS ...]

Used first for the committed records: gate_real (minesweeper runs, ``null`` -> 0) and oxford_table4
(Amazon Photo runs, ``"per_class"`` -> ``null``).
"""
from __future__ import annotations

import argparse
import copy
import fcntl
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from zoo._io import write_atomic
from zoo.bench.suite.resolve import canonical_split
from zoo.bench.suite.schema import cell_id, group_id

RESULTS, RESOLVED, SKIPPED, LOCK = "results.jsonl", "suite.resolved.json", "skipped.json", "suite.lock"


def canonical_config(config: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """``config`` with its task's split in canonical form; ``None`` when it is already (or its dataset is
    not known here: a user's dataset keeps the split it was given)."""
    task = config["task"]
    try:
        split = canonical_split(task["dataset"], task.get("split"))
    except ValueError:  # a dataset this process does not know
        return None
    if type(split) is type(task.get("split")) and split == task.get("split"):
        return None
    out = copy.deepcopy(config)  # keys keep their places: the file's layout is kept
    out["task"]["split"] = split
    return out


def _rekeyed(item: Dict[str, Any], config: Dict[str, Any]) -> Dict[str, Any]:
    """``item`` (a record or a resolved cell) under ``config``, with the ids hashed from it."""
    old = item["config"]
    if cell_id(old) != item["id"]:
        raise ValueError(f"run {item['id']}: its id is not the hash of its config, so the new id cannot be "
                         "derived from it")
    out = dict(item)  # the same key order
    out["config"], out["id"] = config, cell_id(config)
    if "group" in out and out["group"] == group_id(old):
        out["group"] = group_id(config)
    return out


def _dumper(text: str, parsed: Any, **kw: Any) -> Callable[[Any], str]:
    """The ``json.dumps`` layout that writes ``parsed`` back as ``text`` exactly (sorted keys or the file's
    order, with or without a final newline); a ``ValueError`` when none does."""
    for sort_keys in (True, False):
        dumped = json.dumps(parsed, sort_keys=sort_keys, **kw)
        for end in ("", "\n"):
            if dumped + end == text:
                return lambda obj, s=sort_keys, e=end: json.dumps(obj, sort_keys=s, **kw) + e
    raise ValueError("its JSON layout is not one this script writes back byte for byte")


def _rekey_results(path: Path) -> Tuple[Optional[str], Dict[str, str]]:
    """The new text of a ``results.jsonl`` (``None``: unchanged) and ``{old id: new id}``."""
    lines = path.read_text().splitlines(keepends=True)
    ids: Dict[str, str] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        rec = json.loads(line)
        config = canonical_config(rec["config"]) if isinstance(rec.get("config"), dict) else None
        if config is None:
            continue
        if rec.get("weights"):
            raise ValueError(f"{path}:{i + 1}: run {rec['id']} names a weights file, whose header holds the old "
                             "id; not re-keyed")
        try:
            dump = _dumper(line, rec, allow_nan=False)
            new = _rekeyed(rec, config)
        except ValueError as e:
            raise ValueError(f"{path}:{i + 1}: {e}") from None
        ids[rec["id"]] = new["id"]
        lines[i] = dump(new)
    return ("".join(lines) if ids else None), ids


def _rekey_resolved(path: Path) -> Optional[str]:
    """The new text of a ``suite.resolved.json`` (``None``: unchanged)."""
    text = path.read_text()
    info = json.loads(text)
    changed = False
    for i, cell in enumerate(info["cells"]):
        config = canonical_config(cell["config"])
        if config is not None:
            info["cells"][i] = _rekeyed(cell, config)
            changed = True
    if not changed:
        return None
    try:
        return _dumper(text, json.loads(text), indent=1, default=str)(info)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def _rekey_skipped(path: Path, ids: Dict[str, str]) -> Optional[str]:
    if not path.is_file():
        return None
    text = path.read_text()
    skipped = json.loads(text)
    if not set(skipped) & set(ids):
        return None
    return _dumper(text, skipped, indent=1)({ids.get(k, k): v for k, v in skipped.items()})


def _not_running(folder: Path) -> None:
    lock = folder / LOCK
    if not lock.exists():
        return
    with open(lock) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"{folder}: a runner is writing it ({LOCK} is held); re-key it when the run ends") from None
        fcntl.flock(fh, fcntl.LOCK_UN)


def rekey_folder(folder: Path) -> str:
    """Re-key one results folder in place; a line saying what changed."""
    _not_running(folder)
    results, ids = _rekey_results(folder / RESULTS) if (folder / RESULTS).is_file() else (None, {})
    resolved = _rekey_resolved(folder / RESOLVED) if (folder / RESOLVED).is_file() else None
    skipped = _rekey_skipped(folder / SKIPPED, ids)
    # every file checked before any is written; each replaced whole, so a crash leaves old or new files,
    # and a second run finishes the job (canonical configs are left as they are)
    for name, text in ((RESULTS, results), (RESOLVED, resolved), (SKIPPED, skipped)):
        if text is not None:
            write_atomic(folder / name, text)
    merged = len(ids) - len(set(ids.values()))
    return (f"{folder}: {len(ids)} record(s) re-keyed" + (f" ({merged} now share an id with another)" if merged else "")
            + (", suite.resolved.json re-keyed" if resolved is not None else ""))


def results_folders(paths: List[Path]) -> List[Path]:
    """The results folders at or below ``paths`` (each holds a results.jsonl or a suite.resolved.json)."""
    found = set()
    for p in paths:
        if not p.is_dir():
            raise ValueError(f"{p} is not a folder; pass a zoo bench results folder or a folder of them")
        found |= {f.parent for name in (RESULTS, RESOLVED) for f in p.rglob(name)}
    return sorted(found)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="results folders, or folders holding them")
    args = parser.parse_args(argv)
    try:
        folders = results_folders(args.folders)
        for folder in folders:
            print(rekey_folder(folder))
    except ValueError as e:
        print(f"rekey_split: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
