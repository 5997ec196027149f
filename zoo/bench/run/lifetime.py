"""Worker processes live no longer than the driver that started them.

A pool worker waits on a queue that the driver feeds; if the driver is killed (``kill -9``, the
out-of-memory killer) or stopped (``SIGTERM`` from ``kill``, SLURM or docker), nothing else would
ever end the worker: it would sit idle, holding its memory, and keep multiprocessing's resource
tracker alive beside it.  So each worker

* dies with its driver: on Linux the kernel kills it when the driver exits
  (``PR_SET_PDEATHSIG``), and everywhere a thread watching the driver's end of a pipe (the
  ``multiprocessing.parent_process().sentinel``) exits it;
* ignores ``SIGINT`` and ``SIGTERM``: a signal sent to the whole process group (Ctrl-C, SLURM) is
  the driver's to handle — it stops the workers itself and prints one line, instead of each worker
  dying on its own and its group being recorded as failed.

The resource tracker ends by itself once no process holds its pipe, i.e. with the last worker.

Spawned workers import the driver's ``__main__`` script again; a script that starts workers at its
top level (no ``if __name__ == "__main__":`` guard), or one read from stdin, cannot be imported that
way: :func:`check_main_module` says so in one line before any worker starts.
"""
from __future__ import annotations

import ast
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from multiprocessing import spawn
from multiprocessing.connection import wait
from pathlib import Path
from types import FrameType
from typing import Optional

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _kill_on_parent_death() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watching thread remains
        pass


def _exit_when_parent_exits(sentinel: int) -> None:
    wait([sentinel])  # readable (end of file) once the parent is gone
    os._exit(1)


def init_worker(parent_pid: int) -> None:
    """A pool worker's first step: die with the driver ``parent_pid``, leave signals to it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _kill_on_parent_death()
    if os.getppid() != parent_pid:  # the driver died before the kernel was told: nobody waits for us
        os._exit(1)
    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    if sentinel is not None:
        threading.Thread(target=_exit_when_parent_exits, args=(sentinel,), name="zoo-parent-watch",
                         daemon=True).start()


# --------------------------------------------------------------------------- the main module


def _guarded_lines(tree: ast.Module) -> list:
    """Line ranges of ``if __name__ == "__main__":`` blocks."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            parts = [node.test.left, *node.test.comparators]
            names = {p.id for p in parts if isinstance(p, ast.Name)}
            values = {p.value for p in parts if isinstance(p, ast.Constant)}
            if "__name__" in names and "__main__" in values:
                out.append((node.lineno, node.end_lineno or node.lineno))
    return out


def _main_frame(frame: Optional[FrameType], main_dict: dict) -> Optional[FrameType]:
    while frame is not None:
        if frame.f_globals is main_dict and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back
    return None


def _imported_by_workers(main: object) -> Optional[str]:
    """The main script a spawned worker runs again (as multiprocessing's spawn decides), or ``None``."""
    try:
        data = spawn.get_preparation_data("zoo-worker")
    except Exception:  # noqa: BLE001 - an unusual interpreter: nothing to check
        return None
    name = data.get("init_main_from_name")
    if name is not None:  # python -m MODULE: imported by name (a package's __main__ is skipped)
        return None if name == "__main__" or name.endswith(".__main__") else getattr(main, "__file__", None)
    return data.get("init_main_from_path")


def check_main_module(what: str) -> None:
    """Refuse (``RuntimeError``, one line) to start spawned workers that would fail to import the
    driver's main script: read from stdin, or calling ``what`` at its top level without a guard."""
    main = sys.modules.get("__main__")
    path = _imported_by_workers(main)
    if main is None or path is None:
        return  # an interactive session, python -c, a notebook, python -m pkg: workers import nothing of it
    fix = (f"{what} starts worker processes, which import your script again: put the call under "
           "`if __name__ == \"__main__\":`, or use workers=1")
    if not Path(path).is_file():
        raise RuntimeError(f"{what} starts worker processes, which import the main script again, but it was read "
                           f"from {getattr(main, '__file__', path)} (no file to import): save it as a .py file and run it with the call under "
                           "`if __name__ == \"__main__\":`, or use workers=1")
    frame = _main_frame(sys._getframe(1), vars(main))
    if frame is None:
        return  # called from a function defined elsewhere, not while the script runs its top level
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return
    line = frame.f_lineno
    if not any(lo <= line <= hi for lo, hi in _guarded_lines(tree)):
        raise RuntimeError(fix)
