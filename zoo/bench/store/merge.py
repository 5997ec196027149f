"""``zoo merge OUT... --out DIR``: shard / slice folders of one suite -> one results folder.

Every input must come from the same resolved suite (``suite.resolved.json`` equal except for
``selection`` — which shard / ``--where`` slice it ran — and ``path``, where the suite file lay
on that machine).  Records are copied, in input order, without dropping or duplicating any:
a run finished in two inputs is an error naming both, and failed records are kept only for
runs that no input finished (so a re-run of the merged folder retries exactly those).  The
merged folder is built next to ``DIR`` and renamed into place: it appears whole or not at all.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

from zoo._io import write_atomic
from zoo.bench.store import records

PathLike = Union[str, Path]
IGNORED_KEYS = ("selection", "path")


class MergeError(ValueError):
    """The inputs cannot be merged (different suites, duplicated runs, missing files)."""


@dataclass
class MergeSummary:
    out: Path
    inputs: int
    runs: int              # finished runs in the merged file
    failed: int            # failed records kept (no input finished them)
    total: int             # cells of the suite
    shards: List[List[int]] = field(default_factory=list)
    missing_shards: List[int] = field(default_factory=list)


def _resolved(folder: Path) -> Dict[str, Any]:
    path = folder / "suite.resolved.json"
    if not path.is_file():
        raise MergeError(f"{folder} has no suite.resolved.json; pass folders written by `zoo bench`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise MergeError(f"{path} is not valid JSON ({e})") from None


def _comparable(info: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in info.items() if k not in IGNORED_KEYS}


def merge(inputs: Sequence[PathLike], out: PathLike) -> MergeSummary:
    """Merge results folders of one suite into ``out`` (which must not exist or be empty)."""
    folders = [Path(p) for p in inputs]
    out = Path(out)
    _check_folders(folders, out)
    infos = [_resolved(f) for f in folders]
    _check_one_suite(folders, infos)
    shards, missing = _shards(folders, infos)
    lines, kept_failed, skipped = _collect(folders)
    merged_info = dict(infos[0])
    merged_info.pop("selection", None)
    merged_info["merged_from"] = [{"folder": str(f), "selection": i.get("selection")} for f, i in zip(folders, infos)]
    _write(out, [*lines, *kept_failed], merged_info, skipped)
    return MergeSummary(out=out, inputs=len(folders), runs=len(lines), failed=len(kept_failed),
                        total=len(infos[0].get("cells", [])), shards=[list(s) for s in shards],
                        missing_shards=missing)


def _check_folders(folders: Sequence[Path], out: Path) -> None:
    if not folders:
        raise MergeError("zoo merge needs at least one results folder")
    for f in folders:
        if not f.is_dir():
            raise MergeError(f"{f} is not a results folder (a directory written by `zoo bench --out`)")
    seen_dirs: Dict[Path, Path] = {}
    for f in folders:
        key = f.resolve()
        if key in seen_dirs:
            raise MergeError(f"{f} is given twice (also as {seen_dirs[key]})")
        seen_dirs[key] = f
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(f"--out {out} exists and is not an empty folder; choose a new one")
    if out.resolve() in seen_dirs:
        raise MergeError(f"--out {out} is one of the inputs")


def _check_one_suite(folders: Sequence[Path], infos: Sequence[Dict[str, Any]]) -> None:
    ref = _comparable(infos[0])
    for f, info in zip(folders[1:], infos[1:]):
        if _comparable(info) != ref:
            diff = sorted(k for k in set(ref) | set(_comparable(info)) if ref.get(k) != info.get(k))
            raise MergeError(f"{f} and {folders[0]} come from different suites (suite.resolved.json differs in "
                             f"{', '.join(diff)}); merge only shards / slices of one suite run with the same code")


def _shards(folders: Sequence[Path], infos: Sequence[Dict[str, Any]]) -> Tuple[List[Any], List[int]]:
    """The inputs' shards and, where they all split the suite into the same n, the shards missing."""
    shards = [i["selection"]["shard"] for i in infos if (i.get("selection") or {}).get("shard")]
    counts = {n for _, n in shards}
    if len(counts) != 1:
        return shards, []
    n = counts.pop()
    taken: Dict[int, Path] = {}
    for f, info in zip(folders, infos):
        s = (info.get("selection") or {}).get("shard")
        if s and (info.get("selection") or {}).get("where") == (infos[0].get("selection") or {}).get("where"):
            if s[0] in taken:
                raise MergeError(f"{f} and {taken[s[0]]} are both shard {s[0]}/{n}")
            taken[s[0]] = f
    return shards, [i for i in range(1, n + 1) if i not in taken]


def _collect(folders: Sequence[Path]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], Dict[str, str]]:
    """Finished records (each run once), the failures of runs that never finished, the skips."""
    finished: Dict[str, Path] = {}
    lines: List[Dict[str, Any]] = []
    failed: Dict[str, Dict[str, Any]] = {}
    for f in folders:
        for rec in records.read_records(f):
            if records.is_failed(rec):
                failed[rec["id"]] = rec  # the latest failure of a run is the one kept
                continue
            if rec["id"] in finished:
                where = "twice in " + str(f) if finished[rec["id"]] == f else f"in {finished[rec['id']]} and in {f}"
                raise MergeError(f"run {rec['id']} is finished {where}; the inputs overlap "
                                 "(merge each shard once, or remove the duplicate line)")
            finished[rec["id"]] = f
            lines.append(rec)
    kept_failed = [r for i, r in failed.items() if i not in finished]
    skipped: Dict[str, str] = {}
    for f in folders:
        p = f / "skipped.json"
        if p.is_file():
            skipped.update({k: v for k, v in json.loads(p.read_text()).items() if k not in finished})
    return lines, kept_failed, skipped


def _write(out: Path, recs: Sequence[Dict[str, Any]], info: Dict[str, Any], skipped: Dict[str, str]) -> None:
    """Write the merged folder beside ``out`` and rename it into place: nothing half-written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".merging"))
    try:
        body = "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in recs)
        write_atomic(tmp / records.RESULTS_FILE, body)
        write_atomic(tmp / "suite.resolved.json", json.dumps(info, indent=1, sort_keys=True, default=str))
        write_atomic(tmp / "skipped.json", json.dumps(skipped, indent=1, sort_keys=True))
        os.chmod(tmp, 0o755)
        if out.exists():
            out.rmdir()  # empty (checked above); rename(2) cannot replace it on every platform
        os.rename(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
