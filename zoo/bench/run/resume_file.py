"""Where a suite group's mid-run resume state lives: ``OUT/checkpoints/<key>.pt``, keyed and
fingerprinted by the group's cells, removed once the group's records are written.

The state itself, its saving policy and its atomic writes are the trainer's
(:mod:`zoo.trainer.resume`); this module only names the file after the cells of a run.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Sequence, Union

#: the folder keeps its first name, so a group interrupted before the rename still finds its state
RESUME_DIR = "checkpoints"


def resume_key(cells: Sequence[Any], stacked: bool) -> str:
    """The file name of a job's resume state: its cells (ids), stacking and nothing else, so the
    same job of a re-run (same suite, ``--max-replicas``) finds it."""
    ids = ",".join(c.id for c in cells)
    return f"{cells[0].group}-{hashlib.sha1(f'{ids}|{int(stacked)}'.encode()).hexdigest()[:12]}"


def fingerprint(cells: Sequence[Any], stacked: bool) -> Dict[str, Any]:
    """What must match for a saved state to be resumed: the cells' full configurations."""
    return {"cells": [c.id for c in cells], "stacked": bool(stacked),
            "configs": hashlib.sha1(json.dumps([c.config for c in cells], sort_keys=True, default=str)
                                    .encode()).hexdigest()}


def remove_resume_file(out: Union[str, Path], cells: Sequence[Any], stacked: bool) -> None:
    """Delete a finished job's resume state file (the driver, once its records are written)."""
    path = Path(out) / RESUME_DIR / f"{resume_key(cells, stacked)}.pt"
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty
