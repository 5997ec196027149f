"""The CUDA benchmark of the Triton attention (``benchmarks/speed_triton.py``) runs cleanly where
there is no GPU: one line saying there is nothing to time, exit status 0.  Its ``main`` runs in this
process (``python benchmarks/speed_triton.py`` is ``sys.exit(main())``) with torch seeing no CUDA
device, as under ``CUDA_VISIBLE_DEVICES=""``."""
from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from tests.conftest import REPO


@pytest.fixture
def speed_triton(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # as the script does for its sibling speed_kernels
    spec = importlib.util.spec_from_file_location("speed_triton", REPO / "benchmarks" / "speed_triton.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "speed_triton", module)
    spec.loader.exec_module(module)
    return module


def test_without_a_cuda_device_nothing_to_time(speed_triton, capsys):
    assert speed_triton.main(["--device", "cuda"]) == 0
    assert capsys.readouterr().out.strip() == "no CUDA device: nothing to time"


def test_a_cpu_device_is_refused_in_one_line(speed_triton, capsys):
    with pytest.raises(SystemExit) as e:
        speed_triton.main(["--device", "cpu"])
    assert e.value.code == 2
    assert "use benchmarks/speed_kernels.py for the CPU" in capsys.readouterr().err.strip().splitlines()[-1]
