"""Runs per hour: one-at-a-time vs grouped (stacked, vmap) training of the same cells.

Trains the same R cells (one architecture, R seeds) twice in this process — one replica at a
time, then all R stacked — and prints runs/hour for both and their ratio.  The issue's target
is >= 5x on a GPU for Cora-size graphs and >= 3x on CPU.  On the CPU it runs with
one torch thread by default, as ``zoo bench`` does (``--threads``); ``--clock cpu`` times process
CPU time (steadier when other jobs share the cores).

    python benchmarks/speed_sweep.py                       # Cora, GAT/GCN L=2/5, R=10, cpu or cuda
    python benchmarks/speed_sweep.py --device cuda --replicas 20 --epochs 100
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import torch

import zoo
from zoo.trainer.cells import resolve_device
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock: Callable[[], float] = time.perf_counter


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_runs(task, model: str, layers: int, seeds, cfg: TrainConfig, device, stacked: bool) -> float:
    def factory() -> torch.nn.Module:
        return zoo.build(model, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=64, num_layers=layers)

    _sync(device)
    start = _clock()
    if stacked:
        reps, view = build_replicas(task, [factory] * len(seeds), seeds, device, torch.float32, cfg, True)
        train_replicas(task, reps, view, cfg, seeds)
    else:
        for s in seeds:
            reps, view = build_replicas(task, [factory], [s], device, torch.float32, cfg, False)
            train_replicas(task, reps, view, cfg, [s])
    _sync(device)
    return _clock() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="cora")
    p.add_argument("--models", default="gat,gcn")
    p.add_argument("--layers", default="2,5")
    p.add_argument("--replicas", type=int, default=10)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--device", default=None)
    p.add_argument("--data-root", default=None)
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: 1 on the CPU, as zoo bench runs a group; torch's on a GPU)")
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                   help="wall time (default) or process CPU time (steadier on a shared machine)")
    args = p.parse_args()
    global _clock
    _clock = CLOCK[args.clock]
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    from zoo.datasets import load

    device = resolve_device(args.device)
    if args.threads or device.type == "cpu":
        torch.set_num_threads(args.threads or 1)
    task = load(args.dataset, root=args.data_root, transforms=["normalize_features"])
    # loss_threshold=0 and no patience: every run does exactly `epochs` epochs in both modes
    cfg = TrainConfig(optimizer="adam", lr=0.005, epochs=args.epochs, loss_threshold=0.0)
    seeds = list(range(args.replicas))
    print(f"device: {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else os.cpu_count()} "
          f"{'' if device.type == 'cuda' else 'cores'}), {torch.get_num_threads()} torch thread(s), {args.clock} clock, "
          f"load average {os.getloadavg()[0]:.2f}; dataset {args.dataset}; {args.replicas} runs x {args.epochs} epochs")
    print(f"{'model':8} {'L':>3} {'sequential runs/h':>18} {'grouped runs/h':>15} {'ratio':>6}")
    ratios = []
    for model in args.models.split(","):
        for layers in map(int, args.layers.split(",")):
            warm = TrainConfig(**{**cfg.__dict__, "epochs": 2})  # warm-up of both paths
            time_runs(task, model, layers, seeds[:2], warm, device, True)
            time_runs(task, model, layers, seeds[:1], warm, device, False)
            seq = time_runs(task, model, layers, seeds, cfg, device, stacked=False)
            grp = time_runs(task, model, layers, seeds, cfg, device, stacked=True)
            ratio = seq / grp
            ratios.append(ratio)
            print(f"{model:8} {layers:>3} {3600 * len(seeds) / seq:>18.0f} {3600 * len(seeds) / grp:>15.0f} {ratio:>5.2f}x")
    geo = float(torch.tensor(ratios).log().mean().exp())
    print(f"grouped / one-at-a-time speed ratio (geometric mean): {geo:.2f}x")


if __name__ == "__main__":
    main()
