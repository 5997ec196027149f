"""``make test-gpu`` cannot pass by skipping: with ``ZOO_REQUIRE_CUDA=1`` and no GPU the CUDA checks
fail in one line naming the fix."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def test_required_cuda_without_a_gpu_fails_in_one_line():
    env = {**os.environ, "ZOO_REQUIRE_CUDA": "1", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/ops/compiled/test_triton_cuda.py"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0
    assert "RuntimeError: ZOO_REQUIRE_CUDA=1 but torch sees no CUDA device" in done.stdout, done.stdout[-3000:]
