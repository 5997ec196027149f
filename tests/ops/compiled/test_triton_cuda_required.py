"""``make test-gpu`` cannot pass by skipping: with ``ZOO_REQUIRE_CUDA=1`` and no GPU the CUDA checks
fail in one line naming the fix (at the module's import: pytest reports it as an error of the file)."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from tests.conftest import REPO


def test_required_cuda_without_a_gpu_fails_in_one_line(monkeypatch):
    monkeypatch.setenv("ZOO_REQUIRE_CUDA", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without a GPU
    path = REPO / "tests" / "ops" / "compiled" / "test_triton_cuda.py"
    spec = importlib.util.spec_from_file_location("_triton_cuda_required", path)
    try:
        with pytest.raises(RuntimeError, match=r"^ZOO_REQUIRE_CUDA=1 but torch sees no CUDA device .*make test-gpu"):
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
    except pytest.skip.Exception as skipped:  # a skip is what ZOO_REQUIRE_CUDA=1 must prevent
        pytest.fail(f"the CUDA checks skipped instead of failing: {skipped}")
