"""``make gpu-check`` (benchmarks/gpu_check.py) and its parts that run without a GPU: the summary
file from the steps' outputs, the GPU-busy arithmetic (benchmarks/gpu_busy.py, run on the CPU) and
speed_train's ``--device`` handling."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.conftest import REPO

H200 = REPO / "docs" / "reproduction" / "devices" / "h200-2026-11-28" / "results.jsonl"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


gc = _module("gpu_check")
busy = _module("gpu_busy")

SPEED_OUT = """machine: NVIDIA H200, torch 2.11.0+cu130, CUDA 13.0, 16 CPU cores; allocator tuned (both sides): True
30 epochs per timing, best of 2, wall clock, CUDA-synchronised; ms per replica-epoch (train step + per-epoch evaluation)
config                              PyG loop   ours R=1  ratio  ours R=15  ratio
-----------------------------------------------------------------------------------
cora gatv2 L=10 w64                    31.78      16.89  0.53x       1.85  0.06x
cornell gatv2 L=2 w64                   7.88       0.15  0.02x       0.05  0.01x
pubmed gat L=5 w64 8h                  16.26      15.06  0.93x       3.37  0.21x
targets: ratio <= 0.40x at R=1, <= 0.10x at R=15
"""
BUSY_OUT = ("cornell_npz gatv2 L=40 R=15 on cuda: wall/epoch 158.00 ms, kernel time/epoch 9.70 ms (6.1% busy), "
            "kernels/epoch 2502, us wall per kernel 63.1\n")


def test_the_gpu_tests_are_make_test_gpus():
    make = (REPO / "Makefile").read_text()
    recipe = make[make.index("\ntest-gpu:"):].split("\n\n")[0]
    assert tuple(re.findall(r"tests/\S+\.py", recipe)) == gc.GPU_TESTS
    assert "\ngpu-check:\n\t$(PYTHON) benchmarks/gpu_check.py" in make  # the machine's Python, no .venv


def test_summary_states_each_figure_against_its_target():
    results = {
        "tests": gc.StepResult("tests", [], 0, 55.5, "....\n28 passed in 55.50s\n"),
        "speed": gc.StepResult("speed", [], 0, 140.0, SPEED_OUT),
        "busy": gc.StepResult("busy", [], 0, 20.0, BUSY_OUT),
        "slice": gc.StepResult("slice", [], None, 250.0, "", timed_out=True),
    }
    text = gc.summary(results, H200, ["- torch 2.11.0+cu130"])
    assert "## CUDA tests (exit 0, 56 s)\n\n28 passed" in text
    assert "| cora gatv2 L=10 w64 R=15 | 31.78 | 1.85 | 0.060 | ≤ 0.015 NOT met |" in text
    assert "| cornell gatv2 L=2 w64 R=1 | 7.88 | 0.15 | 0.020 | ≤ 0.25 met |" in text
    assert "| pubmed gat L=5 w64 8h R=15 | 16.26 | 3.37 | 0.210 | ≤ 0.1 NOT met |" in text
    assert ("wall 158.00 ms/epoch (target ≤ 12: NOT met), kernels 9.70 ms/epoch, busy 6.1 % (target ≥ 50 %: NOT met), "
            "2502 kernels/epoch") in text
    assert "## balance_table2, dataset=cornell_npz (stopped at its limit after 250 s)" in text
    assert "not finished in 250 s (target ≤ 90 s: NOT met); 45 of 75 runs recorded" in text
    assert "| 2 | 15 | 43.9 s | 8.51 | 0.4144 |" in text and "| 10 | 15 | 131.9 s |" in text


def test_summary_of_a_finished_slice_and_of_steps_not_run(tmp_path):
    results = {"tests": gc.StepResult("tests", [], None, note="the CUDA tests need --device cuda"),
               "slice": gc.StepResult("slice", [], 0, 84.0, "")}
    text = gc.summary(results, tmp_path / "absent.jsonl")
    assert "## CUDA tests (not run: the CUDA tests need --device cuda)" in text
    assert "slice wall 84 s (target ≤ 90 s: met)" in text


def test_parsers_read_nothing_from_other_text():
    assert gc.speed_rows("Traceback ...") == [] and gc.busy_figures("error") is None
    assert gc.test_counts("1 failed, 27 passed, 2 skipped in 3s") == {"failed": 1, "passed": 27, "skipped": 2}


def test_kernel_time_arithmetic():
    ev = lambda key, count, cpu_us, dev_us: SimpleNamespace(key=key, count=count, self_cpu_time_total=cpu_us,
                                                          self_device_time_total=dev_us)
    events = [ev("aten::mm", 10, 300.0, 1000.0), ev("zoo_triton::gatv2_forward", 4, 2000.0, 500.0),
              ev("autograd::engine::evaluate_function: X", 3, 900.0, 0.0), ev("cudaLaunchKernel", 14, 700.0, 0.0)]
    assert busy.kernel_time(events, torch.device("cuda")) == (pytest.approx(1.5e-3), 14)  # device time only
    assert busy.kernel_time(events, torch.device("cpu")) == (pytest.approx(2.3e-3), 14)  # computing operators only
    b = busy.Busy(epochs=20, wall_s=2.0, kernel_s=0.5, kernels=2000)
    assert b.fraction == 0.25
    assert b.line("x") == ("x: wall/epoch 100.00 ms, kernel time/epoch 25.00 ms (25.0% busy), kernels/epoch 100, "
                           "us wall per kernel 1000.0")
    assert gc.busy_figures(b.line("x")) == {"wall_ms": 100.0, "kernel_ms": 25.0, "busy": 0.25, "kernels": 100.0}


def test_cpu_smoke_run_writes_the_summary(tmp_path, mirror):
    """``gpu_check --device cpu --quick --steps busy``: the profile runs on the CPU (kernel time = the
    computing operators' self time) and the summary file carries its figure."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--quick", "--steps",
                           "tests,busy", "--out", str(tmp_path), "--data", str(mirror)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / gc.SUMMARY).read_text()
    fig = gc.busy_figures((tmp_path / "busy.log").read_text())
    assert fig is not None and 0 < fig["busy"] <= 1 and fig["kernels"] > 0
    assert "## GPU busy" in text and "busy " in text and "not run: the CUDA tests need --device cuda" in text
    assert "- torch " in text and "budget 480 s" in text


def test_unknown_step_is_one_line(tmp_path):
    with pytest.raises(SystemExit) as e:
        gc.main(["--steps", "tests,speeed", "--out", str(tmp_path)])
    assert e.value.code == 2


def test_speed_train_refuses_cuda_without_a_device_and_the_cpu_clock_on_cuda(monkeypatch, capsys):
    """In this process (the checks come before any timing), with torch seeing no CUDA device as under
    ``CUDA_VISIBLE_DEVICES=""``: exit code 2 and one line naming the problem."""
    st = _module("speed_train")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["speed_train.py", *args])
        with pytest.raises(SystemExit) as e:
            st.main()
        return e.value.code, capsys.readouterr().err.splitlines()[-1]

    code, last = run("--device", "cuda")
    assert code == 2 and "--device cuda: this torch sees no CUDA device" in last
    code, last = run("--device", "cuda", "--clock", "cpu")
    assert code == 2 and "--clock cpu times the host only" in last


def test_synchronised_clock_is_the_clock_on_the_cpu():
    st = _module("speed_train")
    clock = lambda: 42.0
    assert st.synchronised_clock(clock, torch.device("cpu")) is clock
    assert st.warmup_epochs(torch.device("cpu")) == 1 and st.warmup_epochs(torch.device("cuda")) == 3


def test_the_cuda_graphs_line_is_read_into_the_summary():
    line = busy.graphs_line("cornell_npz gatv2 L=40 R=15 on cuda", {"on": 11.5, "off": 98.25})
    assert line == ("cornell_npz gatv2 L=40 R=15 on cuda: cuda graphs on 11.50 ms/epoch, off 98.25 ms/epoch "
                    "(on/off 0.117x)")
    assert gc.graphs_figures(line) == {"on_ms": 11.5, "off_ms": 98.25} and gc.graphs_figures("error") is None
    text = gc.summary({"graphs": gc.StepResult("graphs", [], 0, 30.0, line + "\n")}, REPO / "absent.jsonl")
    assert ("## CUDA graphs on vs off, cornell_npz gatv2 L=40 R=15 (exit 0, 30 s)\n\non 11.50 ms/epoch (target ≤ 12: "
            "met), off 98.25 ms/epoch, on/off 0.117x") in text
    assert "--graphs" in gc.step_commands("cuda", REPO)["graphs"]
