"""The GPU check in one command (``make gpu-check``): the CUDA tests, training speed against PyG, how
busy the GPU is, and the Cornell slice of ``balance_table2`` — in at most ``--budget`` seconds
(default 480) on one GPU, written to one summary file with each figure against its target.

Steps (each a subprocess with its own time limit; its full output goes to ``OUT/STEP.log``):

1. ``tests``: the CUDA checks of ``make test-gpu`` (:data:`GPU_TESTS`, ``ZOO_REQUIRE_CUDA=1``:
   no GPU or no Triton fails, not skips), run with this Python (``make test-gpu`` itself needs the
   project's ``.venv``, which a bare GPU machine does not have);
2. ``speed``: ``benchmarks/speed_train.py --device cuda --epochs 30 --repeat 2`` (both sides
   timed by the CUDA-synchronised wall clock);
3. ``busy``: ``benchmarks/gpu_busy.py``: cornell_npz gatv2 L = 40, 15 stacked replicas, 20 epochs
   under ``torch.profiler``: kernel time / wall time;
   ``graphs``: ``benchmarks/gpu_busy.py --graphs``: the same training's ms per epoch with CUDA graphs
   on and off (``--cuda-graphs``, :mod:`zoo.trainer.graphs`), in one process;
4. ``slice``: ``zoo bench balance_table2 --where dataset=cornell_npz --device cuda --workers 5``
   into ``OUT/balance_table2``, with what is left of the budget (a slice cut short keeps its
   finished groups, and the summary says so).

What the machine needs (nothing is downloaded): Python with torch (a CUDA build), torch_geometric,
triton and pytest; this repository (any folder; the check runs from its root); the raw dataset
files in ``ZOO_DATA_MIRROR`` (or ``--data``): ``Cora/``, ``PubMed/``, ``cornell/`` and
``heterophilous/`` as in the project's mirror; ``--wheels DIR``: wheels of anything else missing
(the H200 check carried ``ogb``, ``outdated`` and ``littleutils``), installed with ``pip --no-index
--no-deps`` into ``OUT/site`` for the check only.

    python benchmarks/gpu_check.py --out gpu-check --data /path/to/datasets [--wheels whl/]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
#: the test files of ``make test-gpu`` (tests/benchmarks/test_gpu_check.py keeps the two lists equal)
GPU_TESTS = ("tests/ops/compiled/test_triton_cuda.py", "tests/models/test_hidden_heads.py",
             "tests/trainer/test_cuda_graphs_gpu.py")
STEPS = ("tests", "speed", "busy", "graphs", "slice")
#: steps that need a CUDA device, and the summary's note where there is none
CUDA_ONLY = {"tests": "the CUDA tests need --device cuda", "graphs": "CUDA graphs need --device cuda"}
SUMMARY = "gpu_check_summary.md"
#: seconds each step may take at most (the slice gets what is left of the budget)
STEP_LIMITS = {"tests": 150, "speed": 150, "busy": 60, "graphs": 60}
#: targets: ours / PyG per replica-epoch at R = 15 and at R = 1, by speed_train config
SPEED_TARGETS = {"cora": (0.015, 0.25), "cornell": (0.01, 0.25), "pubmed": (0.10, 0.25)}
BUSY_TARGET_MS, BUSY_TARGET_SHARE, SLICE_TARGET_S = 12.0, 0.50, 90.0


@dataclass
class StepResult:
    name: str
    command: List[str]
    rc: Optional[int]          # None: not run
    seconds: float = 0.0
    output: str = ""
    timed_out: bool = False
    note: str = ""


def step_commands(device: str, out: Path, quick: bool = False) -> Dict[str, List[str]]:
    """The command of each step (``quick``: a few epochs and small configurations, for a CPU smoke run)."""
    py = sys.executable
    speed = ["--epochs", "3", "--repeat", "1", "--configs", "cornell", "--replicas", "1,3"] if quick else \
        ["--epochs", "30", "--repeat", "2"]
    busy = ["--layers", "2", "--replicas", "2", "--epochs", "2"] if quick else []
    return {
        "tests": [py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *GPU_TESTS],
        "speed": [py, "benchmarks/speed_train.py", "--device", device, *speed],
        "busy": [py, "benchmarks/gpu_busy.py", "--device", device, *busy],
        "graphs": [py, "benchmarks/gpu_busy.py", "--device", device, "--graphs", "--epochs", "30"],
        "slice": [py, "-m", "zoo", "bench", "balance_table2", "--where", "dataset=cornell_npz", "--device", device,
                  "--workers", "5", "--out", str(out / "balance_table2"), "--quiet"],
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


# --------------------------------------------------------------------------- reading the outputs


def test_counts(output: str) -> Dict[str, int]:
    """``{"passed": n, "failed": n, ...}`` from pytest's last line."""
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed)", output)}


def speed_rows(output: str) -> List[Dict[str, object]]:
    """speed_train's rows: config, PyG ms, and ``{replicas: (ms, ratio)}``."""
    header = re.search(r"^config\s+PyG loop((?:\s+ours R=\d+\s+ratio)+)", output, re.M)
    if not header:
        return []
    counts = [int(r) for r in re.findall(r"ours R=(\d+)", header.group(1))]
    rows = []
    for line in output.splitlines():
        m = re.match(r"^(\S+ \S+ L=\d+ w\d+(?: \d+h)?)\s+([\d.]+)((?:\s+[\d.]+\s+[\d.]+x)+)\s*$", line)
        if m:
            pairs = re.findall(r"([\d.]+)\s+([\d.]+)x", m.group(3))
            rows.append({"config": m.group(1), "pyg_ms": float(m.group(2)),
                         "ours": {r: (float(a), float(b)) for r, (a, b) in zip(counts, pairs)}})
    return rows


def busy_figures(output: str) -> Optional[Dict[str, float]]:
    """gpu_busy's line: wall ms per epoch, kernel ms per epoch, busy share, kernels per epoch."""
    m = re.search(r"wall/epoch ([\d.]+) ms, kernel time/epoch ([\d.]+) ms \(([\d.]+)% busy\), kernels/epoch (\d+)",
                  output)
    if not m:
        return None
    return {"wall_ms": float(m.group(1)), "kernel_ms": float(m.group(2)), "busy": float(m.group(3)) / 100,
            "kernels": float(m.group(4))}


def graphs_figures(output: str) -> Optional[Dict[str, float]]:
    """gpu_busy --graphs' line: ms per epoch with CUDA graphs on and off."""
    m = re.search(r"cuda graphs on ([\d.]+) ms/epoch, off ([\d.]+) ms/epoch", output)
    return None if not m else {"on_ms": float(m.group(1)), "off_ms": float(m.group(2))}


def slice_groups(results: Path) -> List[Dict[str, object]]:
    """The slice's finished groups (by depth): runs, group wall time, ms per epoch, mean test accuracy."""
    if not results.is_file():
        return []
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    groups: Dict[int, List[dict]] = {}
    for r in rows:
        if r.get("status", "ok") == "ok":
            groups.setdefault(int(r["config"]["model"]["kwargs"].get("num_layers", 0)), []).append(r)
    return [{"layers": k, "runs": len(v), "wall_s": max(float(r.get("group_wall_time_s") or 0) for r in v),
             "ms_per_epoch": 1e3 * float(v[0].get("time_per_epoch_s") or 0),
             "mean_test": sum(float(r["metrics"]["test"]) for r in v) / len(v)} for k, v in sorted(groups.items())]


def _config_key(label: str) -> str:
    return {"cora": "cora", "cornell": "cornell", "pubmed": "pubmed"}.get(label.split()[0], label.split()[0])


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _status(r: StepResult) -> str:
    if r.rc is None and not r.timed_out:
        return f"not run{': ' + r.note if r.note else ''}"
    state = f"stopped at its limit after {r.seconds:.0f} s" if r.timed_out else f"exit {r.rc}, {r.seconds:.0f} s"
    return state + (f"; {r.note}" if r.note else "")


def summary(results: Mapping[str, StepResult], slice_results: Path, header: Sequence[str] = ()) -> str:
    """The summary file's text: each step's state and figures against the targets."""
    lines = ["# GPU check", "", *header, ""]
    t = results.get("tests")
    if t:
        counts = test_counts(t.output)
        lines += [f"## CUDA tests ({_status(t)})", "",
                  ", ".join(f"{n} {k}" for k, n in counts.items()) or "no pytest summary line (see tests.log)", ""]
    s = results.get("speed")
    if s:
        lines += [f"## Training speed against PyG, ms per replica-epoch ({_status(s)})", "",
                  "| config | PyG | ours | ours / PyG | target |", "|---|---|---|---|---|"]
        for row in speed_rows(s.output):
            targets = SPEED_TARGETS.get(_config_key(str(row["config"])), (None, None))
            for r, (ms, ratio) in sorted(row["ours"].items()):
                target = targets[0] if r > 1 else targets[1]
                verdict = f"≤ {target} {_mark(ratio <= target)}" if target is not None else "–"
                lines.append(f"| {row['config']} R={r} | {row['pyg_ms']:.2f} | {ms:.2f} | {ratio:.3f} | {verdict} |")
        lines.append("")
    b = results.get("busy")
    if b:
        fig = busy_figures(b.output)
        lines += [f"## GPU busy, cornell_npz gatv2 L=40 R=15 ({_status(b)})", ""]
        if fig:
            lines.append(f"wall {fig['wall_ms']:.2f} ms/epoch (target ≤ {BUSY_TARGET_MS:g}: "
                         f"{_mark(fig['wall_ms'] <= BUSY_TARGET_MS)}), kernels {fig['kernel_ms']:.2f} ms/epoch, "
                         f"busy {100 * fig['busy']:.1f} % (target ≥ {100 * BUSY_TARGET_SHARE:.0f} %: "
                         f"{_mark(fig['busy'] >= BUSY_TARGET_SHARE)}), {fig['kernels']:.0f} kernels/epoch")
        else:
            lines.append("no figure (see busy.log)")
        lines.append("")
    g = results.get("graphs")
    if g:
        fig = graphs_figures(g.output)
        lines += [f"## CUDA graphs on vs off, cornell_npz gatv2 L=40 R=15 ({_status(g)})", "",
                  (f"on {fig['on_ms']:.2f} ms/epoch (target ≤ {BUSY_TARGET_MS:g}: "
                   f"{_mark(fig['on_ms'] <= BUSY_TARGET_MS)}), off {fig['off_ms']:.2f} ms/epoch, "
                   f"on/off {fig['on_ms'] / fig['off_ms']:.3f}x") if fig
                  else "no figure (see graphs.log)", ""]
    sl = results.get("slice")
    if sl:
        groups = slice_groups(slice_results)
        finished = sl.rc == 0
        lines += [f"## balance_table2, dataset=cornell_npz ({_status(sl)})", "",
                  (f"slice wall {sl.seconds:.0f} s (target ≤ {SLICE_TARGET_S:g} s: {_mark(sl.seconds <= SLICE_TARGET_S)})"
                   if finished else f"not finished in {sl.seconds:.0f} s (target ≤ {SLICE_TARGET_S:g} s: NOT met); "
                   f"{sum(g['runs'] for g in groups)} of 75 runs recorded"), "",
                  "| L | runs | group wall | ms/epoch | mean test |", "|---|---|---|---|---|"]
        lines += [f"| {g['layers']} | {g['runs']} | {g['wall_s']:.1f} s | {g['ms_per_epoch']:.2f} | {g['mean_test']:.4f} |"
                  for g in groups]
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the check


def environment(args: argparse.Namespace, out: Path) -> Dict[str, str]:
    """The steps' environment: the data mirror, a scratch data folder, the carried wheels if any."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", OUTDATED_IGNORE="1", ZOO_REQUIRE_CUDA="1", TRITON_INTERPRET="0")
    if args.data:
        env["ZOO_DATA_MIRROR"] = str(Path(args.data).resolve())
    env.setdefault("ZOO_DATA", str(out / "data"))
    paths = [str(ROOT)]
    if args.wheels:
        site = out / "site"
        wheels = sorted(str(p) for p in Path(args.wheels).glob("*.whl"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(site), *wheels], check=False)
        paths.append(str(site))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def header_lines(env: Mapping[str, str]) -> List[str]:
    code = ("import torch; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '|', "
            "torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device')\n"
            "from importlib.metadata import PackageNotFoundError, version\n"
            "for m in ('triton', 'torch_geometric', 'pytest'):\n"  # versions without importing (PyG imports dynamo)
            "    try: print(m, version(m))\n"
            "    except PackageNotFoundError: print(m, 'not installed')")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(env), capture_output=True, text=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return [f"- {line}" for line in (done.stdout + done.stderr).splitlines()] + \
        [f"- commit {commit.stdout.strip() or 'unknown (not a git checkout)'}", f"- {os.cpu_count()} CPU cores"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="gpu-check", help="folder for the summary, the logs and the slice's records")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu runs a smoke check (--quick)")
    p.add_argument("--data", default=None, help="the raw dataset files (default: $ZOO_DATA_MIRROR)")
    p.add_argument("--wheels", default=None, help="a folder of wheels to install for the check (no index)")
    p.add_argument("--budget", type=float, default=480.0, help="seconds for all steps (default 480)")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)}")
    p.add_argument("--quick", action="store_true", help="a few epochs, small configurations (a smoke run)")
    args = p.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        p.error(f"--steps: unknown {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = environment(args, out)
    commands = step_commands(args.device, out, args.quick)
    start = time.perf_counter()
    results: Dict[str, StepResult] = {}
    for name in STEPS:
        if name not in steps:
            continue
        if name in CUDA_ONLY and not args.device.startswith("cuda"):
            results[name] = StepResult(name, commands[name], None, note=CUDA_ONLY[name])
            continue
        left = args.budget - (time.perf_counter() - start)
        limit = min(STEP_LIMITS.get(name, left), left)
        if limit < 5:
            results[name] = StepResult(name, commands[name], None, note="no budget left")
            continue
        results[name] = run_step(name, commands[name], limit, env, out)
        print(f"{name}: {_status(results[name])}", flush=True)
    text = summary(results, out / "balance_table2" / "results.jsonl",
                   header_lines(env) + [f"- budget {args.budget:.0f} s, used {time.perf_counter() - start:.0f} s"])
    (out / SUMMARY).write_text(text)
    print(f"summary: {out / SUMMARY}")
    return 0 if all(r.rc == 0 for r in results.values() if r.rc is not None or r.timed_out) else 1


if __name__ == "__main__":
    raise SystemExit(main())
