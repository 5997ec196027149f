"""Data root, offline mirrors and checksums.

Where data lives, in order of precedence:

* the data **root** (PyG/OGB write ``processed/`` there): the ``root`` argument, else
  ``$ZOO_DATA``, else a per-user cache dir (``$XDG_CACHE_HOME/gat-zoo/datasets``);
* read-only **mirrors**: ``$ZOO_DATA_MIRROR``, one or more folders separated by
  ``os.pathsep`` and laid out like the data root (``Cora/raw/ind.cora.x`` ...). Raw files are
  *copied* from a mirror into the root before a dataset class is instantiated, so the
  classes never reach the network and never write into a mirror.

A mirror's ``SHA256SUMS`` (``sha256sum`` format, paths relative to the mirror) is used to
check every staged file; a mismatch raises :class:`ChecksumError` naming the file.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

MIRROR_ENV = "ZOO_DATA_MIRROR"
ROOT_ENV = "ZOO_DATA"
OFFLINE_ENV = "ZOO_OFFLINE"
SUMS_FILE = "SHA256SUMS"


class MissingDataError(FileNotFoundError):
    """Raw files of a dataset are neither cached, mirrored nor downloadable."""


class ChecksumError(ValueError):
    """A staged or cached raw file does not match the mirror's ``SHA256SUMS``."""


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gat-zoo" / "datasets"


def resolve_root(root: "str | os.PathLike[str] | None" = None) -> Path:
    """The data root: argument > ``$ZOO_DATA`` > the per-user cache dir."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ROOT_ENV)
    return Path(env).expanduser() if env else default_root()


def checked_root(root: "str | os.PathLike[str] | None" = None) -> Path:
    """:func:`resolve_root`, refused up front (``ValueError``) when it names an existing file:
    datasets would fail deep inside PyG with a raw ``NotADirectoryError``."""
    path = resolve_root(root)
    if path.exists() and not path.is_dir():
        where = "root=" if root is not None else f"${ROOT_ENV}="
        raise ValueError(f"the data root {where}{str(path)!r} is a file, not a folder; pass a folder "
                                 "(it is created if missing) or leave it unset for the per-user cache")
    return path


def mirror_dirs() -> List[Path]:
    """Mirror folders from ``$ZOO_DATA_MIRROR`` (missing folders are ignored)."""
    raw = os.environ.get(MIRROR_ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def downloads_allowed(download: Optional[bool] = None) -> bool:
    """``download`` if given, else False when ``$ZOO_OFFLINE`` is set to a true value."""
    if download is not None:
        return bool(download)
    return os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("1", "true", "yes", "on")


# --------------------------------------------------------------------------- checksums

_SUMS_CACHE: Dict[Tuple[str, float], Dict[str, str]] = {}
_HASH_CACHE: Dict[Tuple[str, float, int], str] = {}


def read_sums(mirror: Path) -> Dict[str, str]:
    """``relative path -> sha256`` from ``mirror/SHA256SUMS`` (empty when absent)."""
    path = mirror / SUMS_FILE
    if not path.is_file():
        return {}
    key = (str(path), path.stat().st_mtime)
    if key not in _SUMS_CACHE:
        sums: Dict[str, str] = {}
        for line in path.read_text().splitlines():
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                sums[parts[1].lstrip("*").removeprefix("./")] = parts[0].lower()
        _SUMS_CACHE[key] = sums
    return _SUMS_CACHE[key]


def sha256_of(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime, st.st_size)
    if key not in _HASH_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _HASH_CACHE[key] = h.hexdigest()
    return _HASH_CACHE[key]


def expected_sha256(rel: str, mirrors: Sequence[Path]) -> Optional[Tuple[str, Path]]:
    for m in mirrors:
        digest = read_sums(m).get(rel)
        if digest:
            return digest, m
    return None


def _check(path: Path, rel: str, digest: str, sums_at: Path, dataset: str, how_to_fix: str) -> None:
    actual = sha256_of(path)
    if actual != digest:
        raise ChecksumError(
            f"checksum mismatch for {dataset!r} file {path}: sha256 {actual}, expected {digest} "
            f"(from {sums_at / SUMS_FILE}, entry {rel!r}). {how_to_fix}"
        )


# --------------------------------------------------------------------------- staging

def _umask() -> int:
    try:  # Linux: read it without the set-and-restore race of os.umask
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """Mode of files the zoo writes into the data root: 0666 minus the umask (0644 usually)."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """Mode of folders the zoo creates: 0777 minus the umask (0755 usually)."""
    return 0o777 & ~_umask()


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


def stage(dataset: str, root: Path, rel_files: Sequence[str]) -> List[str]:
    """Copy ``rel_files`` (paths relative to a data root) from the mirrors into ``root``.

    Files already under ``root`` are kept (and checked when a mirror lists their
    checksum). Copies go to a temporary file first and are renamed only once complete and
    verified, so nothing half-written is left behind. Returns the files still missing.
    """
    mirrors = mirror_dirs()
    missing: List[str] = []
    for rel in rel_files:
        target = root / rel
        expected = expected_sha256(rel, mirrors)
        if target.is_file():
            if expected:
                _check(target, rel, *expected, dataset,
                       f"Delete the cached copy {target} so it is staged again from the mirror.")
            continue
        source = find_in_mirrors(rel, mirrors)
        if source is None:
            missing.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            shutil.copyfile(source, tmp)
            os.chmod(tmp, file_mode())  # mkstemp makes 0600; a shared data root needs 0644 (umask 022)
            if expected:
                _check(tmp, rel, *expected, dataset,
                       f"The mirror copy {source} is corrupted: restore it (e.g. `sha256sum -c "
                       f"{SUMS_FILE}` in {expected[1]}).")
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()
    return missing


def stage_tree(dataset: str, root: Path, rel_dir: str) -> bool:
    """Copy a whole folder (e.g. an OGB dataset dir) from the first mirror holding it.

    Every file of the mirror's folder is staged (and verified against ``SHA256SUMS``) even
    when ``root/rel_dir`` already exists, so a partial folder left by a failed download is
    completed, never taken as present. ``processed/`` folders are not copied: processed
    caches are only trusted when the zoo wrote them (see :mod:`zoo.datasets.cache`).
    Returns True when a mirror holds the folder.
    """
    for m in mirror_dirs():
        source = m / rel_dir
        if source.is_dir():
            files = [str(p.relative_to(m)) for p in sorted(source.rglob("*"))
                     if p.is_file() and "processed" not in p.relative_to(source).parts[:-1]]
            stage(dataset, root, files)
            return True
    return False


def missing_data_error(dataset: str, root: Path, rel_files: Sequence[str], source: str,
                       cause: Optional[BaseException] = None) -> MissingDataError:
    mirrors = mirror_dirs()
    shown = ", ".join(rel_files[:12]) + (f", ... ({len(rel_files)} files)" if len(rel_files) > 12 else "")
    searched = [str(root)] + [str(m) for m in mirrors]
    msg = (
        f"dataset {dataset!r} ({source}) is not available offline: raw files missing: {shown}. "
        f"Searched the data root and mirrors: {', '.join(searched)}"
        + ("" if mirrors else f" (no mirror set: ${MIRROR_ENV} is empty)")
        + ". To provide it, put the raw files at those paths under a folder and set "
        f"{MIRROR_ENV}=<folder> (several folders separated by {os.pathsep!r}), or place them under "
        f"the data root, or allow the download (network access, ${OFFLINE_ENV} unset)."
    )
    if cause is not None:
        msg += f" Download failed with: {type(cause).__name__}: {cause}"
    return MissingDataError(msg)
