"""Where a dataset's raw files are looked for, torch-free (the environment and the file system only):
the data root, the read-only mirrors, and whether a download may be tried.  :mod:`zoo.datasets.mirror`
stages from them; ``benchmarks/dataset_sizes.py`` records whether a dataset is in the project's mirror
(:func:`mirrored`) without importing the data loaders."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

MIRROR_ENV = "ZOO_DATA_MIRROR"
ROOT_ENV = "ZOO_DATA"
OFFLINE_ENV = "ZOO_OFFLINE"


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gat-zoo" / "datasets"


def resolve_root(root: "str | os.PathLike[str] | None" = None) -> Path:
    """The data root: argument > ``$ZOO_DATA`` > the per-user cache dir."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ROOT_ENV)
    return Path(env).expanduser() if env else default_root()


def mirror_dirs() -> List[Path]:
    """Mirror folders from ``$ZOO_DATA_MIRROR`` (missing folders are ignored)."""
    raw = os.environ.get(MIRROR_ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def downloads_allowed(download: Optional[bool] = None) -> bool:
    """``download`` if given, else False when ``$ZOO_OFFLINE`` is set to a true value."""
    if download is not None:
        return bool(download)
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


def find_in_mirrors(rel: str, mirrors: Sequence[Path]) -> Optional[Path]:
    for m in mirrors:
        candidate = m / rel
        if candidate.is_file():
            return candidate
    return None


def missing_files(root: Path, rel_files: Iterable[str], mirrors: Optional[Sequence[Path]] = None) -> List[str]:
    """Files of ``rel_files`` found neither under ``root`` nor in any mirror."""
    mirrors = mirror_dirs() if mirrors is None else mirrors
    return [r for r in rel_files if not (root / r).is_file() and find_in_mirrors(r, mirrors) is None]


def mirrored(rel_files: Sequence[str], mirrors: Optional[Sequence[Path]] = None) -> bool:
    """Whether every raw file of ``rel_files`` (paths relative to a data root; ``dir/`` a whole folder)
    is in a mirror (default :func:`mirror_dirs`)."""
    mirrors = mirror_dirs() if mirrors is None else mirrors
    return all(any((m / r).is_dir() for m in mirrors) if r.endswith("/") else find_in_mirrors(r, mirrors) is not None
               for r in rel_files)
