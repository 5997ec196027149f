"""Where a run happened: the zoo's commit, library versions, device and host (recorded with every run),
and what decides its floating-point summation order (:func:`float_order`).

Long SGD runs on the same code and seeds split through summation order: a re-run is bitwise equal
only where these fields are (docs/reliability.md states the contract).
"""
from __future__ import annotations

import os
import platform
import re
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
            "host": platform.node(), "float_order": float_order(device)}


#: CPU flags that change which kernels (and so which summation order) torch and its BLAS pick
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "amx_tile", "asimd", "sve")


@lru_cache(maxsize=1)
def _cpu() -> Dict[str, Any]:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text()
        # the first core's lines (findall: every core repeats them)
        found = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
        model = found[0].strip() if found else model
        line = re.findall(r"^(?:flags|Features)\s*:\s*(.+)$", text, re.M)
        flags = set(line[0].split()) if line else set()
    except OSError:  # not Linux: the model name only
        pass
    return {"cpu": model, "isa": [f for f in ISA_FLAGS if f in flags],
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}


@lru_cache(maxsize=1)
def _blas() -> str:
    """The BLAS / LAPACK torch was built with (``BLAS_INFO`` / ``LAPACK_INFO`` of its build settings)."""
    config = torch.__config__.show()
    parts = [m.group(0) for m in re.finditer(r"(?:BLAS_INFO|LAPACK_INFO)=[^,\s]+", config)]
    mkl = re.findall(r"Math Kernel Library Version ([^\s]+)", config)
    return ", ".join(parts + ([f"MKL {mkl[0]}"] if mkl else [])) or "unknown"


def float_order(device: torch.device) -> Dict[str, Any]:
    """What decides the summation order of a run's floating-point arithmetic: the CPU model and its
    ISA flags, torch's thread count at the time of the call, torch's version and BLAS build; on
    CUDA the GPU, the CUDA / cuDNN versions and the TF32 switches."""
    out: Dict[str, Any] = {**_cpu(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                           "blas": _blas()}
    if device.type == "cuda":
        out.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version(), tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                   tf32_cudnn=torch.backends.cudnn.allow_tf32, deterministic=torch.are_deterministic_algorithms_enabled())
    return out
