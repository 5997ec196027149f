"""Whole process: ``zoo bench`` of one stacked group from the command line against a plain PyG loop.

Times two commands as whole processes (start-up imports, data loading, training, records and
leaderboard included), in turn, ``--pairs`` times after one warm-up each:

* **zoo**: ``zoo bench SUITE.toml --out DIR --quiet`` on a generated suite of ``--runs`` Cornell runs
  (GATv2, 2 layers, width 64, SGD lr 0.05, row-normalised features, the three inits Xavier / Bal_X /
  Bal_O x seeds, no early stop: every run trains ``--epochs`` epochs) — one group of stacked replicas;
* **PyG**: one Python process training the same runs one after the other with PyG's ``GATv2Conv``
  (``pyg_reference.py``), ``torch.optim.SGD`` and an evaluation forward with train / val / test
  accuracy every epoch (the data through the zoo's loader, from the same cache).

Both run on ``--threads`` torch threads (default 1, as ``zoo bench`` trains).  It prints each
pair's wall and CPU seconds (the child's own rusage), the ratios zoo / PyG and their medians, and
for the zoo side the group's training time from its records (``group_wall_time_s``) against the
rest of the process.  ``--ref DIR`` runs the zoo side with another checkout of the zoo on
``PYTHONPATH`` as a third command (before / after a change).

    python benchmarks/speed_process.py                       # 15 runs x 1500 epochs, 2 pairs
    python benchmarks/speed_process.py --epochs 300 --pairs 1
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
INITS = ("xavier", "balanced_xavier", "balanced_orthogonal")
CONFIG = dict(dataset="cornell", model="gatv2", layers=2, hidden=64, heads=1, lr=0.05)


def suite_text(runs: int, epochs: int) -> str:
    """The generated suite: ``runs`` cells (inits x seeds) of one architecture, one group."""
    seeds = list(range((runs + len(INITS) - 1) // len(INITS)))
    return f"""[suite]
name = "process_cornell"
title = "Whole-process benchmark: Cornell GATv2 L=2, one stacked group"

[defaults]
dataset = "{CONFIG['dataset']}"
model = "{CONFIG['model']}"
num_layers = {CONFIG['layers']}
hidden_dim = {CONFIG['hidden']}
optimizer = "sgd"
lr = {CONFIG['lr']}
epochs = {epochs}
loss_threshold = 0.0
transforms = ["normalize_features"]

[grid]
init = {json.dumps(list(INITS))}
seed = {json.dumps(seeds)}

[leaderboard]
rows = ["init"]
columns = "num_layers"
metric = "test"
"""


# --------------------------------------------------------------------------- the PyG side


def pyg_loop(runs: int, epochs: int) -> None:
    """``runs`` plain PyG runs of ``epochs`` epochs each (train step + evaluation forward)."""
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, HERE)
    from pyg_reference import pyg_model
    from zoo.datasets import load

    task = load(CONFIG["dataset"], transforms=["normalize_features"])
    d = task.data
    x, ei, y = d.x, d.edge_index, d.y
    masks = (d.train_mask, d.val_mask, d.test_mask)
    for run in range(runs):
        torch.manual_seed(run // len(INITS))
        model = pyg_model(CONFIG, task.num_features, task.num_classes)
        opt = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"])
        for _ in range(epochs):
            model.train()
            opt.zero_grad()
            F.cross_entropy(model(x, ei)[masks[0]], y[masks[0]]).backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                pred = model(x, ei).argmax(-1)
                [float((pred[m] == y[m]).float().mean()) for m in masks]


# --------------------------------------------------------------------------- timing processes


def timed(command: Sequence[str], env: Dict[str, str]) -> Tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and the children it waited for)."""
    start = time.perf_counter()
    proc = subprocess.Popen(list(command), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {proc.returncode}:\n{err[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def zoo_command(suite: str, out: str) -> List[str]:
    """The environment's ``zoo`` script, else ``python -P -m zoo``: without ``-P`` the working folder
    comes first on ``sys.path``, and a checkout there would run instead of ``PYTHONPATH``'s (``--ref``)."""
    script = os.path.join(os.path.dirname(sys.executable), "zoo")
    head = [script] if os.path.exists(script) else [sys.executable, "-P", "-m", "zoo"]
    return head + ["bench", suite, "--out", out, "--quiet", "--device", "cpu"]


def group_seconds(out: str) -> float:
    with open(os.path.join(out, "results.jsonl")) as fh:
        return max(float(json.loads(line)["group_wall_time_s"]) for line in fh if line.strip())


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--epochs", type=int, default=1500)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ref", default=None, help="another checkout of the zoo: its zoo bench as a third command")
    p.add_argument("--pyg", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.pyg:
        import torch

        torch.set_num_threads(args.threads)
        pyg_loop(args.runs, args.epochs)
        return 0
    tmp = tempfile.mkdtemp(prefix="speed_process_")
    try:
        suite = os.path.join(tmp, "process_cornell.toml")
        with open(suite, "w") as fh:
            fh.write(suite_text(args.runs, args.epochs))
        threads = str(args.threads)
        env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        env.setdefault("ZOO_DATA_MIRROR", os.path.join(HERE, "..", "..", "shared", "datasets"))
        trees = {"zoo": env.get("PYTHONPATH", "")}
        if args.ref:
            trees["zoo (ref)"] = os.path.abspath(args.ref)
        pyg = [sys.executable, os.path.abspath(__file__), "--pyg", "--runs", str(args.runs), "--epochs",
               str(args.epochs), "--threads", threads]

        def run_zoo(name: str) -> Tuple[float, float, float]:
            out = os.path.join(tmp, f"out-{len(os.listdir(tmp))}")
            wall, cpu = timed(zoo_command(suite, out), dict(env, PYTHONPATH=trees[name]))
            return wall, cpu, group_seconds(out)

        print(f"{args.runs} runs x {args.epochs} epochs, {threads} thread(s); load {os.getloadavg()[0]:.2f}")
        for name in trees:  # warm-up: data cached, compiled kernels built
            run_zoo(name)
        timed(pyg, env)
        rows: Dict[str, List[Tuple[float, float, float]]] = {name: [] for name in trees}
        rows["PyG"] = []
        for _ in range(args.pairs):
            for name in trees:
                rows[name].append(run_zoo(name))
            wall, cpu = timed(pyg, env)
            rows["PyG"].append((wall, cpu, float("nan")))
        pyg_rows = rows["PyG"]
        for name, got in rows.items():
            walls = " ".join(f"{w:.1f}" for w, _, _ in got)
            cpus = " ".join(f"{c:.1f}" for _, c, _ in got)
            line = f"{name:10} wall s {walls:>16}  CPU s {cpus:>16}"
            if name != "PyG":
                wall_ratios = [a[0] / b[0] for a, b in zip(got, pyg_rows)]
                cpu_ratios = [a[1] / b[1] for a, b in zip(got, pyg_rows)]
                group = statistics.median(g for _, _, g in got)
                line += (f"  / PyG: wall {statistics.median(wall_ratios):.3f}x, CPU {statistics.median(cpu_ratios):.3f}x"
                         f"; the group {group:.1f} s, the rest of the process "
                         f"{statistics.median(w for w, _, _ in got) - group:.1f} s")
            print(line)
        print(f"load {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
