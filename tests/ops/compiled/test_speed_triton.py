"""The CUDA benchmark of the Triton attention (``benchmarks/speed_triton.py``) runs cleanly where
there is no GPU: one line saying there is nothing to time, exit status 0."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "benchmarks/speed_triton.py", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_without_a_cuda_device_nothing_to_time():
    done = _run("--device", "cuda")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "no CUDA device: nothing to time"


def test_a_cpu_device_is_refused_in_one_line():
    done = _run("--device", "cpu")
    assert done.returncode == 2
    assert "use benchmarks/speed_kernels.py for the CPU" in done.stderr.strip().splitlines()[-1]
