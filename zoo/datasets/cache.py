"""Verified, atomic processed caches for PyG/OGB dataset classes.

PyG's classes write ``processed/`` once and trust it forever: a truncated file (kill -9
while processing), another dataset's file copied over it, or flipped bytes are loaded as
they are, and ``torch_load`` retries with ``weights_only=False`` (arbitrary code) when a
file needs globals outside torch's allow-list. :func:`verified` returns a subclass of a
dataset class that closes these holes:

* **atomic processing**: ``process()`` writes into a fresh temporary sibling folder
  (``.processed.tmp-<pid>-...``) that is renamed into place only once complete, together
  with a **stamp** (``zoo_stamp.json``, written atomically): the SHA-256 of every raw file,
  a code version (zoo cache format, the class, PyG/OGB versions), the SHA-256 and size of
  every processed file, and the dataset's statistics (nodes, edges, features, classes).
* **verified loading**: before a processed folder is used, its stamp must exist and match
  (same code version, same raw checksums, same processed checksums); otherwise the folder
  is deleted and re-processed from the raw files (which the mirror's ``SHA256SUMS``
  verify) with a one-line warning. After loading, :func:`check_stats` compares the data's
  statistics with the stamp's and the registry's; a mismatch re-processes once, then
  raises :class:`DataIntegrityError` naming the raw folder and the fix.
* **safe unpickling**: processed files are read with ``torch.load(weights_only=True)`` and
  the explicit allow-list :data:`ALLOWED_GLOBALS`, never retried without it; a file that
  needs anything else raises :class:`UnsafeFileError`. PyG's own reading of
  ``pre_transform.pt`` (``weights_only=False``) is bypassed as well.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

import torch

from .mirror import dir_mode, file_mode, sha256_of

#: Bump when the zoo changes how a processed folder is produced or what the stamp holds.
CACHE_FORMAT = 1
STAMP_FILE = "zoo_stamp.json"
_TMP_TAG = ".tmp-"


class DataIntegrityError(RuntimeError):
    """A processed or raw dataset file is not what it should be and cannot be repaired."""


class UnsafeFileError(DataIntegrityError):
    """A processed file needs unpickling beyond the allow-list (it could run code)."""


def allowed_globals() -> List[Any]:
    """The only non-tensor types a processed file may contain (PyG's data containers)."""
    from torch_geometric.data import Data, HeteroData
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import EdgeStorage, GlobalStorage, NodeStorage

    return [Data, HeteroData, DataEdgeAttr, DataTensorAttr, GlobalStorage, NodeStorage, EdgeStorage]


# torch.serialization's allow-list API (torch >= 2.5); older torch (the DGL environment's 2.2) lacks it.
_HAS_SAFE_GLOBALS = all(hasattr(torch.serialization, n)
                        for n in ("get_safe_globals", "add_safe_globals", "clear_safe_globals"))


@contextmanager
def allow_globals(extra: Sequence[Any]) -> Iterator[None]:
    """Like ``torch.serialization.safe_globals`` but on exit it removes only what it added:
    torch's context manager restores its snapshot, dropping globals that libraries (PyG on a
    lazy import) registered meanwhile, which would send PyG's own loads to its unsafe retry."""
    ser = torch.serialization
    if not _HAS_SAFE_GLOBALS:  # torch < 2.5: no allow-list to extend (safe_torch_load restricts by itself)
        yield
        return
    before = ser.get_safe_globals()
    added = [g for g in extra if not any(g is b for b in before)]
    ser.add_safe_globals(added)
    try:
        yield
    finally:
        now = ser.get_safe_globals()
        ser.clear_safe_globals()
        ser.add_safe_globals([g for g in now if not any(g is a for a in added)])


def _restricted_pickle_module() -> Any:
    """For torch < 2.4 (no ``add_safe_globals``; the DGL environment's 2.2): a pickle module whose
    unpickler resolves only torch's weights-only globals and :func:`allowed_globals` — the same
    allow-list, enforced in ``find_class`` instead of torch's weights-only unpickler."""
    import pickle
    import types

    from torch import _weights_only_unpickler

    allowed = set(_weights_only_unpickler._get_allowed_globals())
    allowed |= {f"{c.__module__}.{c.__qualname__}" for c in allowed_globals()}

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if f"{module}.{name}" not in allowed:
                raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {module}.{name}")
            return super().find_class(module, name)

    restricted = types.ModuleType("zoo_restricted_pickle")
    restricted.__dict__.update({k: getattr(pickle, k) for k in ("load", "loads", "UnpicklingError")})
    restricted.Unpickler = Unpickler
    return restricted


def safe_torch_load(path: "str | os.PathLike[str]") -> Any:
    """``torch.load(path, weights_only=True)`` with :func:`allowed_globals`; never falls back."""
    import pickle

    try:
        if not _HAS_SAFE_GLOBALS:
            return torch.load(path, map_location="cpu", weights_only=False, pickle_module=_restricted_pickle_module())
        with allow_globals(allowed_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise UnsafeFileError(
            f"refusing to load {path}: it needs unpickling beyond the allowed PyG data types "
            f"({first[:200]}), so it was not written by PyG/the zoo and could run code. Delete "
            f"{Path(path).parent} to re-process the dataset from its raw files.") from e
    except Exception as e:  # truncated / not a torch file / bad zip
        raise DataIntegrityError(f"cannot read processed file {path} ({type(e).__name__}: {e}); "
                                 f"delete {Path(path).parent} to re-process it.") from e


# --------------------------------------------------------------------------- stamps

def _write_json_atomic(path: Path, obj: Mapping[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_stamp(folder: Path) -> Optional[Dict[str, Any]]:
    try:
        out = json.loads((folder / STAMP_FILE).read_text())
        return out if isinstance(out, dict) else None
    except (OSError, ValueError):
        return None


def code_version(cls: type) -> str:
    import torch_geometric

    parts = [f"zoo-cache-{CACHE_FORMAT}", f"{cls.__module__}.{cls.__qualname__}",
             f"torch_geometric-{torch_geometric.__version__}",
             f"zoo-processing-{getattr(cls, 'zoo_processing_version', 0)}"]
    if cls.__module__.startswith("ogb"):
        import ogb

        parts.append(f"ogb-{ogb.__version__}")
    return " ".join(parts)


def _digests(paths: Sequence[str], base: Path) -> Dict[str, List[Any]]:
    return {os.path.relpath(p, base): [sha256_of(Path(p)), os.path.getsize(p)] for p in paths}


def stamp_problem(folder: Path, processed: Sequence[str], raw: Sequence[str], version: str) -> Optional[str]:
    """Why the processed ``folder`` cannot be trusted (None when its stamp matches)."""
    stamp = read_stamp(folder)
    if stamp is None:
        return f"no valid {STAMP_FILE} (interrupted processing, or written by another tool)"
    if stamp.get("code_version") != version:
        return f"made by {stamp.get('code_version')!r}, now {version!r}"
    missing = [p for p in processed if not os.path.isfile(p)]
    if missing:
        return f"missing {', '.join(os.path.basename(p) for p in missing)}"
    raw_base = Path(raw[0]).parent if raw else folder
    if raw and stamp.get("raw") != _digests(raw, raw_base):
        return "the raw files changed since it was processed"
    now = _digests(processed, folder)
    if stamp.get("processed") != now:
        bad = sorted(k for k in now if stamp.get("processed", {}).get(k) != now[k])
        return f"{', '.join(bad)} differ(s) from the checksum recorded when it was processed (corrupted or replaced)"
    return None


# --------------------------------------------------------------------------- the subclass

def _warn(msg: str) -> None:
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _remove_stale_tmp(real: Path) -> None:
    """Temporary folders left by processes that died mid-processing (pid no longer alive)."""
    for p in real.parent.glob(f".{real.name}{_TMP_TAG}*"):
        try:
            pid = int(p.name[len(f".{real.name}{_TMP_TAG}"):].split("-")[0])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:
            pass


class _Verified:
    """Mixin placed before a PyG ``Dataset`` class (see :func:`verified`)."""

    _zoo_tmp_dir: Optional[str] = None

    @property
    def processed_dir(self) -> str:  # type: ignore[override]
        return self._zoo_tmp_dir or super().processed_dir  # type: ignore[misc]

    def _zoo_real_dir(self) -> Path:
        return Path(super().processed_dir)  # type: ignore[misc]

    def _zoo_raw_paths(self) -> List[str]:
        try:
            return sorted(p for p in self.raw_paths if os.path.isfile(p))  # type: ignore[attr-defined]
        except Exception:  # some classes compute raw names from files that may be absent
            return []

    def _process(self) -> None:
        real = self._zoo_real_dir()
        version = code_version(type(self).__mro__[2])
        raw = self._zoo_raw_paths()
        processed = list(self.processed_paths)  # type: ignore[attr-defined]
        if real.exists():
            problem = stamp_problem(real, processed, raw, version)
            if problem is None:
                return
            _warn(f"re-processing {real}: {problem}")
            shutil.rmtree(real)
        real.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(real)
        tmp = Path(tempfile.mkdtemp(prefix=f".{real.name}{_TMP_TAG}{os.getpid()}-", dir=real.parent))
        os.chmod(tmp, dir_mode())  # mkdtemp makes 0700; a shared data root needs the usual mode
        self._zoo_tmp_dir = str(tmp)
        try:
            self.process()  # type: ignore[attr-defined]
            written = [str(p) for p in self.processed_paths]  # type: ignore[attr-defined]
            for p in written:
                os.chmod(p, file_mode())
            _write_json_atomic(tmp / STAMP_FILE, {
                "code_version": version,
                "raw": _digests(raw, Path(raw[0]).parent) if raw else {},
                "processed": _digests(written, tmp),
            })
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            self._zoo_tmp_dir = None
        try:
            os.rename(tmp, real)
        except OSError:  # another process finished first; its (verified) folder wins
            shutil.rmtree(tmp, ignore_errors=True)
            if stamp_problem(real, processed, raw, version) is not None:
                raise

    def load(self, path: str, data_cls: Optional[type] = None) -> None:  # InMemoryDataset.load, safely
        from torch_geometric.data import Data

        try:
            out = safe_torch_load(path)
        except UnsafeFileError:
            raise
        except DataIntegrityError as e:  # unreadable although the stamp matched (e.g. changed since)
            _warn(f"re-processing {Path(path).parent}: {e.__cause__ or e}")
            shutil.rmtree(Path(path).parent, ignore_errors=True)
            self._process()
            out = safe_torch_load(path)
        if not (isinstance(out, tuple) and len(out) in (2, 3)):
            raise DataIntegrityError(f"{path} does not hold a PyG InMemoryDataset (got {type(out).__name__}); "
                                     f"delete {Path(path).parent} to re-process it.")
        data, self.slices = out[0], out[1]
        cls = out[2] if len(out) == 3 else (data_cls or Data)
        self.data = cls.from_dict(data) if isinstance(data, dict) else data


_SUBCLASSES: Dict[type, type] = {}


def verified(cls: type) -> type:
    """``cls`` with verified, atomic processing and safe loading (cached per class)."""
    if cls not in _SUBCLASSES:
        _SUBCLASSES[cls] = type(cls.__name__, (_Verified, cls), {"__module__": cls.__module__,
                                                                 "__qualname__": cls.__qualname__})
    return _SUBCLASSES[cls]


# --------------------------------------------------------------------------- statistics

def dataset_stats(ds: Any, keys: Sequence[str]) -> Dict[str, int]:
    """``nodes, edges, features, classes, graphs`` of a loaded dataset (only ``keys``)."""
    out: Dict[str, int] = {}
    data = ds._data if hasattr(ds, "_data") else ds[0]
    for k in keys:
        if k == "graphs":
            out[k] = len(ds)
        elif k == "nodes":
            out[k] = int(data.num_nodes)
        elif k == "edges":
            out[k] = int(data.num_edges)
        elif k == "features":
            out[k] = int(data.x.size(-1)) if getattr(data, "x", None) is not None else 0
        elif k == "classes":
            out[k] = int(ds.num_classes)
    return out


def processed_folder(ds: Any) -> Path:
    return Path(ds.processed_dir)


def check_stats(name: str, ds: Any, expected: Mapping[str, Any]) -> Optional[str]:
    """Compare ``ds`` with the stamp's statistics and ``expected``; record them in the stamp.

    Returns a description of the mismatch, or None.
    """
    folder = processed_folder(ds)
    stamp = read_stamp(folder) or {}
    keys = sorted(set(k for k, v in expected.items() if isinstance(v, int)) | set(stamp.get("stats", {})))
    keys = [k for k in keys if k in ("nodes", "edges", "features", "classes", "graphs")]
    got = dataset_stats(ds, keys)
    wrong = [f"{k} {got[k]} (expected {expected[k]})" for k in keys
             if isinstance(expected.get(k), int) and got[k] != expected[k]]
    if stamp.get("stats") and any(stamp["stats"].get(k) != got.get(k) for k in stamp["stats"]):
        wrong.append(f"statistics {got} differ from those recorded when processed {stamp['stats']}")
    if wrong:
        return f"{name}: loaded data has " + ", ".join(wrong)
    if stamp and "stats" not in stamp:
        stamp["stats"] = got
        _write_json_atomic(folder / STAMP_FILE, stamp)
    return None


def discard(ds_or_folder: Any) -> None:
    folder = ds_or_folder if isinstance(ds_or_folder, Path) else processed_folder(ds_or_folder)
    shutil.rmtree(folder, ignore_errors=True)


def stats_of(expected: Mapping[str, Any], keys: Tuple[str, ...] = ("nodes", "edges", "features", "classes",
                                                                     "graphs")) -> Dict[str, int]:
    """The integer statistics of a registry ``stats`` dict that a loaded dataset must match."""
    return {k: v for k, v in expected.items() if k in keys and isinstance(v, int) and not isinstance(v, bool)}


def subclass_of(cls: Type[Any]) -> bool:
    return issubclass(cls, _Verified)
