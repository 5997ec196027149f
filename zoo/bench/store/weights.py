"""Saved weights beside the run records (``zoo bench --save-weights best|last``; no torch here).

A results folder run with ``--save-weights`` holds, per finished run, one model file
``OUT/weights/<cell id>.safetensors`` (:mod:`zoo.model_file`: the run's selected or last state,
its build configuration, and in the header's ``extra`` the cell id, seed, epoch and metrics), and
the run's record names it (``"weights": "weights/<id>.safetensors"``, ``"weights_bytes"``).
:func:`find_weights` picks one by cell id (prefix) and seed: ``zoo.load(folder, cell=..., seed=...)``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from zoo._io import write_atomic
from zoo.bench.store import records

PathLike = Union[str, Path]

WEIGHTS_DIR = "weights"
SAVE_WEIGHTS = ("none", "best", "last")

__all__ = ["WEIGHTS_DIR", "SAVE_WEIGHTS", "weights_file", "write_weights", "find_weights", "check_save_weights"]


def check_save_weights(value: Any) -> str:
    """``value`` if it is a ``--save-weights`` choice, else a one-line ``ValueError``."""
    if value not in SAVE_WEIGHTS:
        raise ValueError(f"save_weights must be one of {SAVE_WEIGHTS} (best: the selected epoch's state, last: the "
                         f"final state), got {value!r}")
    return value


def weights_file(cell_id: str) -> str:
    """The model file of run ``cell_id``, relative to its results folder."""
    return f"{WEIGHTS_DIR}/{cell_id}.safetensors"


def write_weights(out: PathLike, cell_id: str, data: bytes) -> str:
    """Write run ``cell_id``'s model file bytes atomically into ``out``; returns the relative path."""
    rel = weights_file(cell_id)
    path = Path(out) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)
    return rel


def _describe(rec: Dict[str, Any]) -> str:
    m = rec.get("config", {}).get("model", {})
    return f"{rec['id'][:10]} (seed {rec.get('seed')}, {m.get('name')} init {m.get('init')})"


def find_weights(folder: PathLike, cell: Optional[str] = None, seed: Optional[int] = None) -> Path:
    """The model file of the one run in ``folder`` whose id starts with ``cell`` and whose seed is
    ``seed`` (either may be left out when the rest is unique); a one-line ``ValueError`` otherwise."""
    folder = Path(folder)
    path = folder / records.RESULTS_FILE
    if not path.is_file():
        raise ValueError(f"{folder} is not a zoo bench results folder (no {records.RESULTS_FILE})")
    runs = [r for r in records.read_records(path) if not records.is_failed(r)]
    saved = [r for r in runs if r.get("weights")]
    if not saved:
        raise ValueError(f"{folder} holds no saved weights: run the suite with --save-weights best (or last)")
    chosen: List[Dict[str, Any]] = [r for r in saved if (cell is None or str(r["id"]).startswith(str(cell)))
                                    and (seed is None or r.get("seed") == seed)]
    if len(chosen) != 1:
        listed = ", ".join(_describe(r) for r in (chosen or saved)[:6])
        more = "" if len(chosen or saved) <= 6 else f" and {len(chosen or saved) - 6} more"
        what = "no run matches" if not chosen else f"{len(chosen)} runs match"
        raise ValueError(f"{folder}: {what} cell={cell!r} seed={seed!r}; choose one with cell= (an id prefix) and "
                         f"seed=: {listed}{more}")
    found = folder / chosen[0]["weights"]
    if not found.is_file():
        raise ValueError(f"{found} is named by its record but missing; re-run that cell (delete its record) to save it")
    return found
