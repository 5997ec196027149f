"""Small file helpers shared by the benchmark layers (stdlib only, a leaf: imports nothing from zoo)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Union

__all__ = ["write_atomic", "user_path", "output_file"]


def user_path(path: Union[str, "os.PathLike[str]"]) -> Path:
    """A path as a user gives it: ``~`` (and ``~user``) expanded, as a shell would."""
    return Path(os.path.expanduser(os.fspath(path)))


def output_file(path: Union[str, "os.PathLike[str]"], default_name: str, make: bool = True) -> Path:
    """Where to write a file given as ``path``: ``~`` expanded; an existing folder gets ``default_name``
    inside it; missing folders are made (``make``).  A path below a file is one ``ValueError`` line, not the raw
    ``FileExistsError`` / ``NotADirectoryError`` of ``mkdir``."""
    out = user_path(path)
    if out.is_dir():
        out = out / default_name
    for parent in reversed(out.parents):
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"cannot write {out}: {parent} is a file, not a folder; choose another path")
    if make:
        out.parent.mkdir(parents=True, exist_ok=True)
    return out


def write_atomic(path: Path, data: Union[str, bytes]) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` via a temporary file + rename: never
    half-written, and the temporary file is removed when the write fails (a full disk).  An
    ``OSError`` names ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.strerror and not e.filename:  # "No space left on device: None"
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
