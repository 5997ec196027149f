"""The run log: one JSON line per finished run, appended atomically.

Each line is written with a single ``os.write`` on an ``O_APPEND`` descriptor and then
``fsync``-ed, so a process killed at any moment leaves either the whole line or nothing.
:func:`read_records` therefore treats a partial or malformed line as corruption and raises —
it never skips anything silently.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterator, List, Union

import torch

PathLike = Union[str, Path]
RESULTS_FILE = "results.jsonl"
# A record's ``status``: "ok" (or absent: older records) for a finished run; "failed" for a run
# whose group raised or whose worker died (with ``error``): not done, so a re-run retries it.
OK, FAILED = "ok", "failed"


class CorruptRecordsError(RuntimeError):
    """A results file holds a line that is not one complete JSON object."""


def append_record(path: PathLike, record: Dict[str, Any]) -> None:
    """Append ``record`` as one JSON line with a single write + fsync (all or nothing)."""
    line = (json.dumps(record, sort_keys=True, allow_nan=False, default=_jsonable) + "\n").encode()
    fd = os.open(str(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - regular files do not short-write
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (set, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot store {type(obj).__name__} in a run record: {obj!r}")


def iter_records(path: PathLike) -> Iterator[Dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        raise CorruptRecordsError(
            f"{path} ends with a partial line; lines are written atomically, so something else wrote to it. "
            "Inspect the last line and remove it by hand if it is garbage."
        )
    for number, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            raise CorruptRecordsError(f"{path}:{number}: empty line in a results file")
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as e:
            raise CorruptRecordsError(f"{path}:{number}: not a JSON object ({e})") from None
        if not isinstance(record, dict) or "id" not in record:
            raise CorruptRecordsError(f"{path}:{number}: a run record must be an object with an 'id'")
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


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The zoo checkout's commit (``+dirty`` when it has local changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "zoo"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@lru_cache(maxsize=1)
def library_versions() -> Dict[str, str]:
    import zoo

    versions = {"python": platform.python_version(), "torch": torch.__version__, "zoo": zoo.__version__}
    try:
        import torch_geometric

        versions["torch_geometric"] = torch_geometric.__version__
    except ImportError:  # pragma: no cover
        pass
    return versions


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def provenance(device: torch.device) -> Dict[str, Any]:
    return {"commit": git_commit(), "versions": library_versions(), "device": device_name(device),
            "host": platform.node()}
