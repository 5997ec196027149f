"""Every Triton kernel specialization (both degree buckets) compiles ahead of time for sm_80 and
sm_90 (no GPU needed), with int64 offset arithmetic in its TTIR: compile errors and int32 offsets
show on the CPU CI.  In a subprocess: this test session runs Triton interpreted."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytest.importorskip("triton", reason="triton is not installed (pip install gat-zoo[cuda])")
from zoo.ops._compiled import rules as _rules  # noqa: E402
if _rules.unavailable_reason():  # a torch without the op-registration API (< 2.4): the plain ops serve
    pytest.skip(_rules.unavailable_reason(), allow_module_level=True)


def _compile(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "tests.ops.compiled.aot_compile", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


def test_every_float32_specialization_compiles_for_sm80_and_sm90():
    # per dtype: 3 score variants x 2 buckets x (forward, pass A with/without d alpha, pass B) + column sum
    assert "compiled 50 of 50 kernels, int64 offsets" in _compile("--dtypes", "fp32")


@pytest.mark.slow
def test_every_specialization_compiles_for_sm80_and_sm90():
    assert "compiled 100 of 100 kernels, int64 offsets" in _compile()
