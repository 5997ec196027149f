"""Where a run happened: the zoo's commit, library versions, device and host (recorded with every run)."""
from __future__ import annotations

import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict

import torch
import torch_geometric

from zoo._version import __version__


@lru_cache(maxsize=1)
def git_commit() -> str:
    """The zoo checkout's commit (``+dirty`` when it has local changes), or ``unknown``."""
    root = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "zoo"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@lru_cache(maxsize=1)
def library_versions() -> Dict[str, str]:
    return {"python": platform.python_version(), "torch": torch.__version__, "zoo": __version__,
            "torch_geometric": torch_geometric.__version__}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def provenance(device: torch.device) -> Dict[str, Any]:
    return {"commit": git_commit(), "versions": library_versions(), "device": device_name(device),
            "host": platform.node()}
