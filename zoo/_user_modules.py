"""The user's own modules, imported so their registrations (datasets, models, inits, norms) exist.

A dataset or model registered in your code is known only to the process that ran that code.  The
``zoo`` command imports what ``--import MODULE`` names (a module on the Python path or in the
current folder, or a ``.py`` file), and a suite may name them itself (``plugins = [...]`` in its
``[suite]`` table, files relative to the suite file); worker processes that run the suite's groups
(``--workers``, Ray) import the same modules before they load a task (:data:`ENV`).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterable, List, Optional, Union

#: the environment variable that hands the imported modules to worker processes (``os.pathsep``-separated)
ENV = "ZOO_IMPORT"

#: the modules imported so far in this process, as :data:`ENV` entries (a file path, or ``DIR::NAME``)
_IMPORTED: List[str] = []


def _from_file(path: Path) -> ModuleType:
    name = path.stem
    if name in sys.modules and Path(getattr(sys.modules[name], "__file__", "") or "").resolve() == path:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its functions pickle by this name (worker processes import it the same way)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _entry(spec: str, module: ModuleType) -> str:
    """How a worker finds ``module`` again: its file, or the folder its package hangs from and its name."""
    file = Path(getattr(module, "__file__", "") or "")
    if spec.endswith(".py") or "." not in module.__name__ and file.name != "__init__.py":
        return str(file.resolve())
    depth = module.__name__.count(".") + (1 if file.name == "__init__.py" else 0)
    return f"{file.resolve().parents[depth]}::{module.__name__}"


def import_module(spec: str, base: Optional[Union[str, Path]] = None) -> ModuleType:
    """Import ``spec``: a ``.py`` file (relative to ``base``, default the current folder) or a module name
    (the current folder searched first, as ``python -m`` does).  One ``ValueError`` line when it fails."""
    where = Path(base) if base is not None else Path.cwd()
    try:
        if spec.endswith(".py") or os.sep in spec or "::" in spec:
            if "::" in spec:  # DIR::NAME, as a worker receives a package module
                folder, name = spec.split("::", 1)
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                module = importlib.import_module(name)
            else:
                path = (where / os.path.expanduser(spec)).resolve()
                if not path.is_file():
                    raise ValueError(f"cannot import {spec}: no file {path}")
                module = _from_file(path)
        else:
            if str(where) not in sys.path:
                sys.path.insert(0, str(where))
            module = importlib.import_module(spec)
    except ValueError:
        raise
    except ModuleNotFoundError as e:
        if e.name == spec.split(".")[0] or e.name == spec:
            raise ValueError(f"cannot import {spec!r}: no such module in {where} or on the Python path; give a "
                             "module name or a .py file") from None
        raise ValueError(f"importing {spec!r} failed: {type(e).__name__}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's module raised: its message, one line
        raise ValueError(f"importing {spec!r} failed: {type(e).__name__}: {e}") from None
    entry = _entry(spec, module)
    if entry not in _IMPORTED:
        _IMPORTED.append(entry)
    return module


def import_modules(specs: Iterable[str], base: Optional[Union[str, Path]] = None) -> List[ModuleType]:
    """:func:`import_module` for each of ``specs``, in order."""
    return [import_module(s, base) for s in specs]


def worker_env() -> dict:
    """``{ENV: ...}`` naming the modules imported here (empty when none), for worker processes."""
    return {ENV: os.pathsep.join(_IMPORTED)} if _IMPORTED else {}


def import_from_env() -> None:
    """In a worker: import the modules the driver imported (:data:`ENV`), once each."""
    for entry in filter(None, os.environ.get(ENV, "").split(os.pathsep)):
        if entry not in _IMPORTED:
            import_module(entry)
