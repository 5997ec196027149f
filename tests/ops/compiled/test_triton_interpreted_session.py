"""The Triton interpreter tests run in the full default suite too.

Triton's interpreter must be on before triton is first imported, and in a full run something
always imports it first (torch_geometric imports torch._dynamo, which imports triton), so
``test_triton_attention.py`` skips itself there.  This test then runs that file in a fresh process
with ``TRITON_INTERPRET=1``; run on its own (or with this folder alone) the file runs in-process
and this test skips."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.ops.compiled.conftest import TRITON_IMPORTED_EARLY

pytest.importorskip("triton", reason="triton is not installed (pip install gat-zoo[cuda])")
from zoo.ops._compiled import rules as _rules  # noqa: E402
if _rules.unavailable_reason():  # a torch without the op-registration API (< 2.4): the plain ops serve
    pytest.skip(_rules.unavailable_reason(), allow_module_level=True)
INTERPRETED = "tests/ops/compiled/test_triton_attention.py"


@pytest.mark.skipif(not TRITON_IMPORTED_EARLY, reason=f"{INTERPRETED} runs in this process")
def test_the_interpreter_tests_pass_in_a_fresh_process(request):
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    markers = request.config.getoption("markexpr") or "not slow"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", markers,
                           INTERPRETED], cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in summary and "skipped" not in summary, summary
