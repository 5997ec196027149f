"""The run log: one JSON line per finished run, appended atomically.

Each line is written with a single ``os.write`` on an ``O_APPEND`` descriptor and then
``fsync``-ed, so a process killed at any moment leaves either the whole line or nothing.
:func:`read_records` therefore treats a partial or malformed line as corruption and raises —
it never skips anything silently.
"""
from __future__ import annotations

import datetime as _dt
import errno
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from zoo.bench.suite.resolve import canonical_split
from zoo.bench.suite.schema import cell_id
from zoo.bench.suite.settings import format_settings

PathLike = Union[str, Path]
RESULTS_FILE = "results.jsonl"
# A record's ``status``: "ok" (or absent: older records) for a finished run; "failed" for a run
# whose group raised or whose worker died (with ``error``): not done, so a re-run retries it.
OK, FAILED = "ok", "failed"


class CorruptRecordsError(RuntimeError):
    """A results file holds a line that is not one complete JSON object."""


class RecordNotWrittenError(OSError):
    """A run finished but its record could not be appended (e.g. the disk is full); the results
    file was rolled back to its previous size, so the run counts as not done and will run again."""


def append_record(path: PathLike, record: Dict[str, Any]) -> None:
    """Append ``record`` as one JSON line with a single write + fsync (all or nothing).

    A failed or short write (disk full, quota) is rolled back: the file is truncated to its size
    before the write and :class:`RecordNotWrittenError` says the run was not recorded.
    """
    line = (json.dumps(record, sort_keys=True, allow_nan=False, default=_jsonable) + "\n").encode()
    fd = os.open(str(path), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = _drop_blank_tail(fd)
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, f"short write, {written} of {len(line)} bytes (disk full?)")
            os.fsync(fd)
        except OSError as e:
            rolled_back = _truncate(fd, size)
            raise RecordNotWrittenError(
                f"run {record.get('id', '?')} finished but was NOT recorded: writing {path} failed "
                f"({e.strerror or e}). "
                + (f"The file was rolled back to its previous {size} bytes; free some space and run again "
                   "(finished runs are kept, this one runs again)." if rolled_back else
                   f"Rolling back also failed: remove the partial last line of {path} by hand.")
            ) from e
    finally:
        os.close(fd)


def _drop_blank_tail(fd: int) -> int:
    """Trailing blank lines (an editor's extra newline) are cut before appending, so that they do not
    become an empty line inside the file; returns the size to append at."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    tail = os.pread(fd, min(size, 4096), size - min(size, 4096))
    stripped = tail.rstrip()
    if len(tail) - len(stripped) <= 1 or not stripped and len(tail) < size:  # just the final newline
        return size
    keep = size - len(tail) + len(stripped) + (1 if stripped else 0)  # up to the last record's newline
    os.ftruncate(fd, keep)
    return keep


def _truncate(fd: int, size: int) -> bool:
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
        return True
    except OSError:
        return False


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot store {type(obj).__name__} in a run record: {obj!r}")


def iter_numbered(path: PathLike) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """``(line number, record)`` for every line of a results file (raises on any corrupt line)."""
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise CorruptRecordsError(
            f"{path} ends with a partial line; records are appended whole (and rolled back when a write "
            "fails), so something else wrote to it. Inspect the last line and remove it by hand if it is garbage."
        )
    lines = data.splitlines()
    while lines and not lines[-1].strip():  # trailing blank lines (an editor's final newline) hold nothing
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            raise CorruptRecordsError(f"{path}:{number}: empty line in a results file")
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CorruptRecordsError(f"{path}:{number}: not a JSON object ({e})") from None
        if not isinstance(record, dict) or "id" not in record:
            raise CorruptRecordsError(f"{path}:{number}: a run record must be an object with an 'id'")
        yield number, record


def iter_records(path: PathLike) -> Iterator[Dict[str, Any]]:
    for _, record in iter_numbered(path):
        yield record


def read_records(path: PathLike) -> List[Dict[str, Any]]:
    """All records of a results file (or of ``<dir>/results.jsonl``), in file order."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    return list(iter_records(path))


def is_failed(record: Dict[str, Any]) -> bool:
    return record.get("status", OK) == FAILED


def completed_ids(path: PathLike) -> set:
    """Ids of finished runs (failed records are not finished: a re-run retries them)."""
    return {r["id"] for r in iter_records(path) if not is_failed(r)}


# --------------------------------------------------------------------------- the suite an output folder holds

RESOLVED_FILE = "suite.resolved.json"


class SuiteMismatchError(RuntimeError):
    """An output folder holds the results of a different (or edited) suite."""


def read_resolved(folder: PathLike) -> Optional[Dict[str, Any]]:
    """The ``suite.resolved.json`` of ``folder`` (``None`` if absent); a corrupt one is an error naming it."""
    path = Path(folder) / RESOLVED_FILE
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CorruptRecordsError(f"{path} is corrupt ({e}); it describes the suite whose results are in "
                                  f"{Path(folder)}: restore it, or move the folder away and run again") from None
    if not isinstance(info, dict) or not isinstance(info.get("cells"), list) or not all(
            isinstance(c, dict) and "id" in c for c in info["cells"]):
        raise CorruptRecordsError(f"{path} is corrupt: expected an object with a 'cells' list of {{'id': ...}}; "
                                  "restore it, or move the folder away and run again")
    return info


def check_same_suite(folder: PathLike, resolved: Dict[str, Any], force_new: bool = False) -> Optional[Path]:
    """Refuse to run ``resolved`` into ``folder`` if it holds another suite's results.

    The same suite, or an extension of it (every old cell still present, e.g. more seeds), resumes;
    so does any resolution of it (same ``--set``) in which every *recorded* run is still a cell (cells
    without records may differ, e.g. an option one dataset lacks under another ``--where``).
    Anything else (other suite, edited cells) raises :class:`SuiteMismatchError` — unless
    ``force_new``, which moves the old results into ``folder/superseded-<UTC time>/`` (kept apart,
    nothing deleted) and returns that path.
    """
    folder = Path(folder)
    old = read_resolved(folder)
    if old is None:
        return None
    old_ids = {c["id"] for c in old["cells"]}
    new_ids = {c["id"] for c in resolved["cells"]}
    if old.get("name") == resolved.get("name") and old_ids <= new_ids:
        return None
    recorded = completed_ids(folder / RESULTS_FILE)
    done = len(recorded)
    if done == 0:  # nothing recorded yet: nothing to mix up
        return None
    if (old.get("name") == resolved.get("name") and (old.get("set") or {}) == (resolved.get("set") or {})
            and set(recorded) <= new_ids):
        return None  # every recorded run is a cell of this suite (cells without records may have changed)
    if force_new:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        archive = folder / f"superseded-{stamp}"
        archive.mkdir()
        for name in (RESULTS_FILE, RESOLVED_FILE, "skipped.json", "leaderboard"):
            if (folder / name).exists():
                os.replace(folder / name, archive / name)
        return archive
    stale = _split_form_changed(old, resolved) if old.get("name") == resolved.get("name") else 0
    if stale:
        raise SuiteMismatchError(
            f"{folder} holds results of suite {old.get('name')!r} written before each split had one form: {stale} of "
            "its cells write their split in another form, so their ids differ. Re-key the folder with "
            f"`python research/rekey_split.py {folder}` (in the zoo's repository), then run again.")
    gone = len(old_ids - new_ids)
    same_name = old.get("name") == resolved.get("name")
    if same_name and (old.get("set") or {}) != (resolved.get("set") or {}):  # zoo bench --set: another protocol
        what = f"suite {old.get('name')!r} run {_set_text(old)}"
        why = f"this run is {_set_text(resolved)}: its cells are other runs"
    else:
        what = f"{'an edited' if same_name else 'another'} suite ({old.get('name')!r}"
        what += f", {_set_text(old)})" if old.get("set") else ")"
        why = _data_changed(old, resolved) or f"{gone} of its cells are not in suite {resolved.get('name')!r}"
    raise SuiteMismatchError(
        f"{folder} holds results of {what}: {len(old_ids)} cells, {done} record(s); {why}, so mixing them would "
        "pool different experiments. Use another --out, or --force-new to move the old results into a "
        "superseded-<time>/ subfolder and start afresh."
    )


def _fingerprints(info: Dict[str, Any]) -> Dict[str, set]:
    out: Dict[str, set] = {}
    for c in info.get("cells") or ():
        task = c["config"]["task"]
        out.setdefault(task["dataset"], set()).add(task.get("fingerprint"))
    return out


def _data_changed(old: Dict[str, Any], new: Dict[str, Any]) -> str:
    """Why the cells differ when a dataset's data did (a registered dataset now loading other data):
    ``""`` when none did."""
    before, now = _fingerprints(old), _fingerprints(new)
    changed = [d for d in sorted(before) if d in now and before[d] != now[d] and None not in before[d] | now[d]]
    if not changed:
        return ""
    d = changed[0]
    return (f"dataset {d!r} now holds other data (fingerprint {', '.join(sorted(before[d]))} -> "
            f"{', '.join(sorted(now[d]))}): its cells are other runs")


def _split_form_changed(old: Dict[str, Any], new: Dict[str, Any]) -> int:
    """How many of ``old``'s cells differ from ``new``'s only by the form their split is written in (a folder
    written before each split had one form, :func:`zoo.bench.suite.resolve.canonical_split`); 0 when any
    differs otherwise."""
    new_ids = {c["id"] for c in new["cells"]}
    stale = 0
    for c in old["cells"]:
        if c["id"] in new_ids:
            continue
        task = c["config"]["task"]
        try:
            split = canonical_split(task["dataset"], task.get("split"))
        except ValueError:  # a dataset this process does not know
            return 0
        if cell_id({**c["config"], "task": {**task, "split": split}}) not in new_ids:
            return 0
        stale += 1
    return stale


def _set_text(info: Dict[str, Any]) -> str:
    """How ``zoo bench --set`` reduced a resolved suite, in words (its own protocol if none)."""
    values = info.get("set") or {}
    return f"with --set {format_settings(values)}" if values else "at the suite's own protocol (no --set)"
