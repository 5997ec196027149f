"""Small file helpers shared by the benchmark layers (stdlib only, a leaf: imports nothing from zoo)."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Union

__all__ = ["write_atomic"]


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
