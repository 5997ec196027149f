"""``make gpu-check`` (benchmarks/gpu_check.py, its summary benchmarks/gpu_summary.py) and its parts that run
without a GPU: the step limits within the budget, the data mirror every step gets, the summary file
from the steps' outputs, the GPU-busy arithmetic on a profiler trace with known kernel times, the CPU
smoke run, speed_train's ``--device`` handling and the bundle for a machine without a package index."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList, FunctionEvent

from tests.conftest import REPO

H200 = Path(os.environ.get("ZOO_DATA_MIRROR", REPO.parent / "shared" / "datasets")).parent / "gpu" / \
    "h200-2026-11-28" / "balance_table2_cornell_npz_results.jsonl"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


gc = _module("gpu_check")
gs = _module("gpu_summary")
busy = _module("gpu_busy")

ENV_OUT = ('env-json: {"torch": "2.11.0+cu130", "cuda": "13.0", "cpu_cores": 16, "device": "NVIDIA H200", '
           '"rng": "per-capture", "triton": "3.6.0", "torch_geometric": "2.8.0", "pytest": "8.3.0"}\n')
BUSY_OUT = ("cornell_npz gatv2 L=40 R=15 on cuda: wall/epoch 158.00 ms, kernel time/epoch 4.80 ms (3.0% busy), "
            "kernels/epoch 1251, us wall per kernel 126.3\n")


def test_the_gpu_tests_are_make_test_gpus():
    make = (REPO / "Makefile").read_text()
    recipe = make[make.index("\ntest-gpu:"):].split("\n\n")[0]
    assert tuple(re.findall(r"tests/\S+\.py", recipe)) == gc.GPU_TESTS
    assert "\ngpu-check:\n\t$(PYTHON) benchmarks/gpu_check.py" in make  # the machine's Python, no .venv


def test_the_step_limits_fit_the_budget():
    """Every step has a limit, and the limits with a margin for process starts fit the 8 minutes."""
    assert set(gc.STEP_LIMITS) == set(gc.STEPS)
    assert sum(gc.STEP_LIMITS.values()) + gc.MARGIN_S <= gc.DEFAULT_BUDGET == 480


def test_every_step_gets_the_data_mirror(tmp_path, monkeypatch):
    """No step may download: the mirror is set even where the caller's environment has none; a data
    folder without the check's datasets is one line naming the fix."""
    monkeypatch.delenv("ZOO_DATA_MIRROR", raising=False)
    data = tmp_path / "datasets"
    for d in gc.NEEDED:
        (data / d).mkdir(parents=True)
    env = gc.environment(Namespace(data=str(data), device="cuda", wheels=None), tmp_path)
    assert env["ZOO_DATA_MIRROR"] == str(data.resolve()) and env["ZOO_REQUIRE_CUDA"] == "1"
    assert env["ZOO_DATA"] == str(tmp_path / "data")
    assert "ZOO_REQUIRE_CUDA" not in gc.environment(Namespace(data=str(data), device="cpu", wheels=None), tmp_path)
    assert gc.check_data(data) is None
    (data / "PubMed").rmdir()
    assert gc.check_data(data) == (f"--data {data}: no PubMed folder(s); give the raw dataset mirror (as "
                                   "../shared/datasets, or the datasets/ of a gpu_bundle.py archive)")
    with pytest.raises(SystemExit) as e:
        gc.main(["--data", str(data), "--out", str(tmp_path / "o")])
    assert e.value.code == 2 and not (tmp_path / "o").exists()


def _trace() -> EventList:
    """A profiler trace as the CUDA profiler builds it: each kernel is a device event *and* is booked on
    the operator that launched it. Kernels: 30 us (20-50), 10 us (60-70), 15 us (65-80, on another stream)."""
    def event(i, name, start, end, device=False):
        return FunctionEvent(id=i, name=name, thread=0, start_us=start, end_us=end, use_device="cuda", stack=[],
                             input_shapes=[], device_type=DeviceType.CUDA if device else DeviceType.CPU)

    mm = event(1, "aten::mm", 0, 100)
    mm.append_kernel("sgemm", 0, 30)
    backward = event(3, "zoo_triton::gatv2_backward", 55, 120)
    backward.append_kernel("backward_dst_kernel", 0, 10)
    backward.append_kernel("backward_src_kernel", 0, 15)
    trace = EventList([mm, event(2, "sgemm", 20, 50, True), backward, event(4, "backward_dst_kernel", 60, 70, True),
                       event(5, "backward_src_kernel", 65, 80, True)], use_device="cuda")
    trace._build_tree()
    return trace


def test_gpu_busy_counts_each_kernel_once():
    """55 us of kernels, busy 50 us (two overlap); summing every row of key_averages() gives 110 us."""
    trace, cuda = _trace(), torch.device("cuda")
    rows = trace.key_averages()
    assert sum(r.self_device_time_total for r in rows) == 110  # what the old figure summed
    assert busy.kernel_time(rows, cuda) == (pytest.approx(55e-6), 3)
    assert busy.kernel_time(trace, cuda) == (pytest.approx(55e-6), 3)
    assert busy.busy_time(trace) == pytest.approx(50e-6)
    b = busy.Busy(epochs=1, wall_s=200e-6, kernel_s=55e-6, kernels=3, busy_s=50e-6)
    assert b.fraction == pytest.approx(0.25)
    assert gs.busy_figures(b.line("x")) == {"wall_ms": 0.2, "kernel_ms": 0.06, "busy": 0.25, "kernels": 3.0}


def test_kernel_time_on_the_cpu_counts_the_computing_operators():
    ev = lambda key, count, cpu_us: SimpleNamespace(key=key, count=count, self_cpu_time_total=cpu_us,  # noqa: E731
                                                    self_device_time_total=0.0, device_type=DeviceType.CPU)
    events = [ev("aten::mm", 10, 300.0), ev("zoo_triton::gatv2_forward", 4, 2000.0),
              ev("autograd::engine::evaluate_function: X", 3, 900.0)]
    assert busy.kernel_time(events, torch.device("cpu")) == (pytest.approx(2.3e-3), 14)


def _write_outputs(out: Path) -> None:
    graph = {"seconds": 4.0, "cuda_graphs": ["replayed"], "epochs_to_best": [3, 9], "epochs_run": [50, 50],
             "stop_reason": ["converged", "converged"], "test": [0.5, 0.6], "val_loss": [[1.0, 0.9], [1.1, 1.0]]}
    fell = {**graph, "cuda_graphs": ["fell back (the self-check at epoch 3 found ...)"]}
    compare = {"replicas_differing": [], "largest_test_diff": 0.0, "largest_val_loss_diff": 2e-7,
               "epochs_compared": 51}
    (out / "records.json").write_text(json.dumps({
        "cornell_gatv2_L2_R15": {"graph": graph, "eager": graph, "eager_again": graph, "graph_vs_eager": compare,
                                 "eager_vs_eager": {**compare, "largest_val_loss_diff": 1e-7}},
        "pubmed_gat_8h_R15": {"graph": fell, "eager": graph, "eager_again": graph,
                              "graph_vs_eager": {**compare, "replicas_differing": [4], "largest_val_loss_diff": 0.02},
                              "eager_vs_eager": compare}}))
    (out / "speed.json").write_text(json.dumps({"machine": "NVIDIA H200", "epochs": 30, "repeat": 1, "rows": [
        {"config": "cora gatv2 L=10 w64", "pyg_ms": 31.78, "ours": [
            {"replicas": 15, "cuda_graphs": "auto", "ms": 0.40, "ratio": 0.0126},
            {"replicas": 15, "cuda_graphs": "off", "ms": 1.85, "ratio": 0.058}]}]}))
    (out / "balance_table2").mkdir()
    h200 = [json.loads(line) for line in H200.read_text().splitlines()]
    mine = [dict(r, cuda_graphs="replayed") for r in h200 if r["config"]["model"]["kwargs"]["num_layers"] in (2, 5)]
    mine[0]["metrics"] = dict(mine[0]["metrics"], test=0.0)
    (out / "balance_table2" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mine))


def test_the_summary_states_each_figure_against_its_target(tmp_path, mirror):
    if not H200.is_file():
        pytest.skip(f"the H200 records are not at {H200}")
    _write_outputs(tmp_path)
    step = lambda name, rc, s, out="", timed_out=False: gc.StepResult(name, [], rc, s, out, timed_out)  # noqa: E731
    results = {"env": step("env", 0, 3, ENV_OUT), "tests": step("tests", 0, 55.5, "28 passed in 55.50s\n"),
               "records": step("records", 0, 80), "speed": step("speed", 0, 70), "busy": step("busy", 0, 20, BUSY_OUT),
               "slice": step("slice", None, 80, timed_out=True),
               "calibrate": step("calibrate", 2, 2, "zoo bench calibrate: error: calibration needs at least 4 "
                                                    "finished trained groups, got 2\n")}
    text = gs.summary(results, tmp_path, REPO, H200, ["- budget 480 s"])
    assert "generator state under CUDA graphs: **per-capture**" in text
    assert "## CUDA tests (exit 0, 56 s)\n\n28 passed" in text
    assert "| cornell_gatv2_L2_R15 | replayed (4.0 s; eager 4.0 s) | 0, 0.0000, 2e-07 | 0, 0.0000, 1e-07 | yes |" in text
    assert "| pubmed_gat_8h_R15 | fell back (the self-check" in text and "| 1, 0.0000, 0.02 | 0, 0.0000, 2e-07 | NO |" \
        in text
    assert "| cora gatv2 L=10 w64 R=15 | auto | 31.78 | 0.40 | 0.013 | ≤ 0.015 met |" in text
    assert "| cora gatv2 L=10 w64 R=15 | off | 31.78 | 1.85 | 0.058 | ≤ 0.015 NOT met |" in text
    assert "busy 3.0 % (target ≥ 50 %: NOT met), 1251 device events/epoch" in text
    assert "30 of 75 runs recorded in 80 s" in text and "| 2 | 15 | 43.9 s | 8.51 | " in text
    assert re.search(r"Against the committed CPU records: 30 runs with the same cell id, test accuracy identical in "
                     r"\d+, largest difference", text)
    assert "earlier H200 records (balance_table2_cornell_npz_results.jsonl): 30 runs with the same cell id, test " \
           "accuracy identical in 29, largest difference" in text
    assert re.search(r"Unfinished groups, extrapolated .*: L=10 ≈ \d+ s, L=20 ≈ \d+ s, L=40 ≈ \d+ s; ", text)
    assert "- records pubmed_gat_8h_R15: fell back (the self-check at epoch 3 found ...) (1 run(s))" in text
    assert "not refitted: zoo bench calibrate: error: calibration needs at least 4 finished trained groups" in text


def test_parsers_read_nothing_from_other_text():
    assert gs.busy_figures("error") is None and gs.graphs_figures("error") is None and gs.env_facts("x") is None
    assert gs.test_counts("1 failed, 27 passed, 2 skipped in 3s") == {"failed": 1, "passed": 27, "skipped": 2}


def test_unknown_step_is_one_line(tmp_path):
    with pytest.raises(SystemExit) as e:
        gc.main(["--steps", "tests,speeed", "--out", str(tmp_path)])
    assert e.value.code == 2


def _smoke(tmp_path, mirror, steps):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--quick", "--steps", steps,
                           "--out", str(tmp_path), "--data", str(mirror)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    return (tmp_path / gc.SUMMARY).read_text()


@pytest.mark.slow  # a subprocess running pytest and the profiler (~25 s); make gpu-check runs it for real
def test_cpu_smoke_run_writes_the_summary(tmp_path, mirror):
    """The smoke run's cheap steps: the environment, the CUDA tests (skipped without a GPU), the profile."""
    text = _smoke(tmp_path, mirror, "env,tests,busy")
    fig = gs.busy_figures((tmp_path / "busy.log").read_text())
    assert fig is not None and 0 < fig["busy"] <= 1 and fig["kernels"] > 0
    assert "generator state under CUDA graphs: **default generator only**" in text  # a CPU build
    assert "## CUDA tests (exit 0" in text and " skipped" in text and "## GPU busy" in text


@pytest.mark.slow
def test_cpu_smoke_run_end_to_end(tmp_path, mirror):
    """Every step on the CPU, graphs through the capture double."""
    text = _smoke(tmp_path, mirror, ",".join(gc.STEPS))
    assert "| cornell_gatv2_L2_R15 | replayed" in text and "| yes |" in text
    assert "## Training speed against PyG" in text and "| off |" in text
    assert "cuda graphs on" in (tmp_path / "graphs.log").read_text()
    assert "runs recorded" in text or "slice wall" in text


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
    clock = lambda: 42.0  # noqa: E731
    assert st.synchronised_clock(clock, torch.device("cpu")) is clock
    assert st.warmup_epochs(torch.device("cpu")) == 1 and st.warmup_epochs(torch.device("cuda")) == 3


def test_the_cuda_graphs_line_is_read_into_the_summary():
    line = busy.graphs_line("cornell_npz gatv2 L=40 R=15 on cuda", {"on": 11.5, "off": 98.25})
    assert gs.graphs_figures(line) == {"on_ms": 11.5, "off_ms": 98.25}
    text = gs.summary({"graphs": gc.StepResult("graphs", [], 0, 30.0, line + "\n")}, REPO / "absent", REPO, H200)
    assert ("## CUDA graphs on vs off, cornell_npz gatv2 L=40 R=15 on cuda (exit 0, 30 s)\n\non 11.50 ms/epoch (target ≤ 12: "
            "met), off 98.25 ms/epoch, on/off 0.117x") in text
    assert "--graphs" in gc.step_commands("cuda", REPO)["graphs"]


def test_the_bundle_packs_project_data_and_wheels_under_the_limit(tmp_path):
    bundle = _module("gpu_bundle")
    data, wheels = tmp_path / "datasets", tmp_path / "wheels"
    for d in bundle.DATASETS:
        (data / d / "raw").mkdir(parents=True)
        (data / d / "raw" / "x.bin").write_bytes(b"\0" * 1000)
    (data / "Other").mkdir()
    (data / "SHA256SUMS").write_text("aa  Cora/raw/x.bin\nbb  Other/y\ncc  heterophilous/cornell/raw/x.bin\n")
    wheels.mkdir()
    (wheels / "ogb-1.3.6-py3-none-any.whl").write_bytes(b"PK")
    out = tmp_path / "b.tar.gz"
    line = bundle.bundle(out, data, wheels, 60)
    assert line.startswith(f"{out}: ") and "1 wheel(s): ogb-1.3.6-py3-none-any.whl" in line
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        sums = tar.extractfile("datasets/SHA256SUMS").read().decode()
        run_sh = tar.extractfile("run.sh").read().decode()
    assert {"gat-zoo/benchmarks/gpu_check.py", "gat-zoo/Makefile", "datasets/Cora/raw/x.bin",
            "datasets/heterophilous/cornell/raw/x.bin", "wheels/ogb-1.3.6-py3-none-any.whl", "run.sh"} <= names
    assert not any(n.startswith("datasets/Other") for n in names)
    assert sums == "aa  Cora/raw/x.bin\ncc  heterophilous/cornell/raw/x.bin\n"
    assert '--data "$here/datasets" --wheels "$here/wheels"' in run_sh
    with pytest.raises(SystemExit, match="over --max-mb 0.001"):
        bundle.bundle(tmp_path / "small.tar.gz", data, wheels, 0.001)
    assert not (tmp_path / "small.tar.gz").exists() and not list(tmp_path.glob(".small*"))
