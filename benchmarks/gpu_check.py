"""The GPU check in one command (``make gpu-check``): every open GPU question answered by one run of at
most ``--budget`` seconds (default 480) on one GPU, into one summary file with each figure against its
target (:mod:`gpu_summary` writes it).

Steps (each a subprocess with its own time limit, :data:`STEP_LIMITS`, which add up to less than the
budget; its output goes to ``OUT/STEP.log``):

1. ``env``: torch, CUDA, the GPU, Triton, PyG, and whether this torch's CUDA graphs keep a
   generator's capture state per capture (:func:`zoo.trainer.graphs.rng_support`, probed);
2. ``tests``: the CUDA checks of ``make test-gpu`` (:data:`GPU_TESTS`, ``ZOO_REQUIRE_CUDA=1``: no GPU
   or no Triton fails, not skips), run with this Python;
3. ``records``: ``benchmarks/graphs_vs_eager.py``: Cornell gatv2 L = 2 and L = 10 at R = 15, Cora R = 1
   with dropout, PubMed 8 heads R = 15, each fitted with CUDA graphs and twice eagerly (the noise floor);
4. ``speed``: ``benchmarks/speed_train.py --cuda-graphs auto,off``: ours / PyG per replica-epoch at R = 1
   and 15 on Cora, Cornell and PubMed, steady state only;
5. ``busy``: ``benchmarks/gpu_busy.py``: cornell_npz gatv2 L = 40 R = 15 under ``torch.profiler``, device
   events only; ``graphs``: the same training's ms per epoch with CUDA graphs on and off;
6. ``slice``: ``zoo bench balance_table2 --where dataset=cornell_npz`` into ``OUT/balance_table2`` for a
   fixed time (its step limit); the summary compares its records with the committed CPU records and
   the earlier H200 records (``--h200``) and extrapolates the groups it did not finish;
7. ``calibrate``: ``zoo bench calibrate OUT/balance_table2 --device cuda``: the ``cuda`` cost entry
   refitted on the slice's records, written to ``OUT/cost_model.json`` (merge its ``cuda`` entry into
   ``zoo/bench/plan/cost_model.json`` by hand, with the summary beside it in ``docs/notes/``).

Every fallback (a record whose ``cuda_graphs`` is ``fell back (...)`` or ``eager (...)``) is listed
with its reason.

What the machine needs (nothing is downloaded): Python with torch (a CUDA build), torch_geometric,
triton and pytest; this repository (any folder; the check runs from its root); the raw dataset files
in ``--data`` (default ``../shared/datasets`` beside the repository): ``Cora/``, ``PubMed/``,
``cornell/`` and ``heterophilous/``; ``--wheels DIR``: wheels of anything else missing, installed with
``pip --no-index --no-deps`` into ``OUT/site`` for the check only.  ``benchmarks/gpu_bundle.py`` packs
all of it into one archive for a machine without a package index.

    python benchmarks/gpu_check.py --out gpu-check [--data DIR] [--wheels DIR]
    python benchmarks/gpu_check.py --device cpu --quick --out /tmp/smoke     # the CPU smoke run

``--device cpu --quick`` is the smoke run: every step on the CPU with a few epochs and small
configurations, the CUDA tests skipped, "graphs" taken through the tests' CPU double of a capture.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_summary  # noqa: E402

#: the test files of ``make test-gpu`` (tests/benchmarks/test_gpu_check.py keeps the two lists equal)
GPU_TESTS = ("tests/ops/compiled/test_triton_cuda.py", "tests/nn/test_base_hidden_heads.py",
             "tests/trainer/test_cuda_graphs_gpu.py")
STEPS = ("env", "tests", "records", "speed", "busy", "graphs", "slice", "calibrate")
SUMMARY = gpu_summary.SUMMARY
DEFAULT_BUDGET = 480.0
#: seconds each step may take at most: they add up to DEFAULT_BUDGET less a margin for the process
#: starts between them and the summary (tests/benchmarks/test_gpu_check.py checks the sum)
STEP_LIMITS = {"env": 20, "tests": 95, "records": 95, "speed": 80, "busy": 30, "graphs": 30, "slice": 80,
               "calibrate": 20}
MARGIN_S = 30.0
#: the smoke run (``--quick``) checks that every step works, not how fast: a loaded CPU may take long
SMOKE_LIMIT_S, SMOKE_BUDGET_S = 900.0, 7200.0
DATA = ROOT.parent / "shared" / "datasets"
#: the datasets the check reads (folders of the mirror)
NEEDED = ("Cora", "PubMed", "cornell", "heterophilous")
H200 = ROOT.parent / "shared" / "gpu" / "h200-2026-11-28" / "balance_table2_cornell_npz_results.jsonl"


@dataclass
class StepResult:
    name: str
    command: List[str]
    rc: Optional[int]          # None: not run
    seconds: float = 0.0
    output: str = ""
    timed_out: bool = False
    note: str = ""


ENV_CODE = """\
import json, torch
from importlib.metadata import PackageNotFoundError, version
from zoo.trainer.graphs import rng_support
out = {"torch": torch.__version__, "cuda": torch.version.cuda, "cpu_cores": __import__("os").cpu_count()}
cuda = torch.cuda.is_available()
out["device"] = torch.cuda.get_device_name(0) if cuda else "no CUDA device"
out["rng"] = rng_support(device=torch.device("cuda", 0)) if cuda else rng_support()
for m in ("triton", "torch_geometric", "pytest"):
    try:
        out[m] = version(m)
    except PackageNotFoundError:
        out[m] = "not installed"
print("env-json: " + json.dumps(out))
"""


def step_commands(device: str, out: Path, quick: bool = False) -> Dict[str, List[str]]:
    """The command of each step (``quick``: the CPU smoke run's small configurations)."""
    py = sys.executable
    cpu = not device.startswith("cuda")
    records = ["--quick", "--configs", "cornell_gatv2_L2_R15"] + (["--double"] if cpu else []) if quick else []
    speed = ["--epochs", "3", "--repeat", "1", "--configs", "cornell", "--replicas", "1,3"] if quick else \
        ["--epochs", "30", "--repeat", "1"]
    busy = ["--layers", "2", "--replicas", "2", "--epochs", "2"] if quick else []
    graphs = ["--layers", "2", "--replicas", "2", "--epochs", "8"] + (["--double"] if cpu else []) if quick else \
        ["--epochs", "30"]
    slice_ = ["--quick", "--where", "num_layers=2", "--workers", "1"] if quick else ["--workers", "5"]
    return {
        "env": [py, "-c", ENV_CODE],
        "tests": [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *GPU_TESTS],
        "records": [py, "benchmarks/graphs_vs_eager.py", "--device", device, "--json", str(out / "records.json"),
                    *records],
        "speed": [py, "benchmarks/speed_train.py", "--device", device, "--cuda-graphs", "auto,off", "--json",
                  str(out / "speed.json"), *speed],
        "busy": [py, "benchmarks/gpu_busy.py", "--device", device, *busy],
        "graphs": [py, "benchmarks/gpu_busy.py", "--device", device, "--graphs", *graphs],
        "slice": [py, "-m", "zoo", "bench", "balance_table2", "--where", "dataset=cornell_npz", "--device", device,
                  "--out", str(out / "balance_table2"), "--quiet", "--no-leaderboard", *slice_],
        "calibrate": [py, "-m", "zoo", "bench", "calibrate", str(out / "balance_table2"), "--device",
                      "cpu" if cpu else "cuda", "--no-suite-factors", "--out", str(out / "cost_model.json")],
    }


def run_step(name: str, command: Sequence[str], limit: float, env: Mapping[str, str], out: Path) -> StepResult:
    """Run ``command`` from the repository root for at most ``limit`` seconds (then its whole process
    group is killed: the slice's worker processes too); its output goes to ``OUT/NAME.log``."""
    start = time.perf_counter()
    log = out / f"{name}.log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(list(command), cwd=ROOT, env=dict(env), stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc, timed_out = proc.wait(timeout=limit), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc, timed_out = None, True
    return StepResult(name, list(command), rc, time.perf_counter() - start, log.read_text(), timed_out)


def check_data(data: Path) -> Optional[str]:
    """Why the data folder cannot serve the check (one line naming the fix), or ``None``."""
    missing = [d for d in NEEDED if not (data / d).is_dir()]
    if missing:
        return (f"--data {data}: no {', '.join(missing)} folder(s); give the raw dataset mirror (as "
                "../shared/datasets, or the datasets/ of a gpu_bundle.py archive)")
    return None


def environment(args: argparse.Namespace, out: Path) -> Dict[str, str]:
    """The steps' environment: the data mirror (always: no step may download), a scratch data
    folder, the carried wheels if any; on the GPU a missing device fails the tests."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", OUTDATED_IGNORE="1", TRITON_INTERPRET="0",
               ZOO_DATA_MIRROR=str(Path(args.data).resolve()), ZOO_DATA=str(out / "data"))
    if args.device.startswith("cuda"):
        env["ZOO_REQUIRE_CUDA"] = "1"
    else:
        env.pop("ZOO_REQUIRE_CUDA", None)
    paths = [str(ROOT)]
    if args.wheels:
        site = out / "site"
        wheels = sorted(str(p) for p in Path(args.wheels).glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(site), *wheels], check=False)
        paths.append(str(site))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_steps(steps: Sequence[str], commands: Mapping[str, List[str]], budget: float, env: Mapping[str, str],
              out: Path, limits: Mapping[str, float] = STEP_LIMITS) -> Dict[str, StepResult]:
    start = time.perf_counter()
    results: Dict[str, StepResult] = {}
    for name in STEPS:
        if name not in steps:
            continue
        left = budget - (time.perf_counter() - start)
        limit = min(limits[name], left)
        if limit < 5:
            results[name] = StepResult(name, commands[name], None, note="no budget left")
            continue
        results[name] = run_step(name, commands[name], limit, env, out)
        print(f"{name}: {gpu_summary.status(results[name])}", flush=True)
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu-check", help="folder for the summary, the logs and the slice's records")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu runs the smoke check (with --quick)")
    p.add_argument("--data", default=str(DATA), help=f"the raw dataset files (default {DATA})")
    p.add_argument("--wheels", default=None, help="a folder of wheels to install for the check (no index)")
    p.add_argument("--budget", type=float, default=None, help=f"seconds for all steps (default "
                                                              f"{DEFAULT_BUDGET:.0f}; --quick {SMOKE_BUDGET_S:.0f})")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    p.add_argument("--h200", default=str(H200), help="the earlier H200 slice records to compare with")
    p.add_argument("--quick", action="store_true", help="a few epochs, small configurations (the smoke run)")
    args = p.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        p.error(f"--steps: unknown {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    problem = check_data(Path(args.data))
    if problem:
        p.error(problem)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = environment(args, out)
    start = time.perf_counter()
    budget = args.budget or (SMOKE_BUDGET_S if args.quick else DEFAULT_BUDGET)
    limits = {name: SMOKE_LIMIT_S for name in STEPS} if args.quick else STEP_LIMITS
    results = run_steps(steps, step_commands(args.device, out, args.quick), budget, env, out, limits)
    header = [f"- budget {budget:.0f} s, used {time.perf_counter() - start:.0f} s; device {args.device}"
              + (" (the CPU smoke run: graphs through the tests' capture double)" if args.quick else "")]
    text = gpu_summary.summary(results, out, ROOT, Path(args.h200), header)
    (out / SUMMARY).write_text(text)
    print(f"summary: {out / SUMMARY}")
    return 0 if all(r.rc == 0 for r in results.values() if r.rc is not None or r.timed_out
                    if r.name not in ("slice", "calibrate")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
