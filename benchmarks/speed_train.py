"""Training throughput: ms per replica-epoch of the zoo's training path vs a plain PyG loop.

"Ours" is the runner's real path (``zoo.trainer.replicas.build_replicas`` + ``train_replicas``: one
training step and the per-epoch evaluation / selection / stopping of the protocol), with 1
replica and with 15 stacked replicas (3 inits x 5 seeds).  "PyG" is what a user would write: a
stack of ``GATv2Conv`` / ``GATConv`` / ``GCNConv`` with ReLU, ``torch.optim.SGD``, one training
step and one eval forward (train / val / test accuracy) per epoch.  Both run in this process, one
after the other, ``--repeat`` times (the best time of each is kept), so the ratio is meaningful
even on a loaded machine.  ``--clock cpu`` times process CPU time instead of wall time (steadier
when other processes share the cores; use it with ``--threads 1``).  ``--device cuda`` runs both
sides on the GPU and times them by wall clock with ``torch.cuda.synchronize`` at each end of a
timing (both sides alike; the GPU's queued work is inside the figure), after 3 warm-up epochs; ours
is then timed in its steady state: a run of ``--epochs`` more epochs than a short one, less the
short one's time (the CUDA graphs' warm-up, capture and self-check and the last, eager, epoch cancel).
``--cuda-graphs auto,off`` times ours once per mode (a column each); ``--json FILE`` writes the table.

    python benchmarks/speed_train.py            # Cora gatv2 L=10 w64, Cornell gatv2 L=2, PubMed gat L=5 8x8
    python benchmarks/speed_train.py --quick    # fewer epochs, one repeat
    python benchmarks/speed_train.py --configs cornell --threads 1
    python benchmarks/speed_train.py --device cuda --epochs 30 --repeat 2 --cuda-graphs auto,off

Targets: ours / PyG <= 0.4 at 1 replica and <= 0.1 at 15 replicas.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F

import zoo
from zoo._allocator import tune_allocator
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/: the shared PyG reference
from pyg_reference import pyg_model  # noqa: E402

CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter
_device = torch.device("cpu")
INITS = ("xavier", "balanced_xavier", "balanced_orthogonal")
CONFIGS: Dict[str, dict] = {
    "cora": dict(dataset="cora", model="gatv2", layers=10, hidden=64, heads=1, lr=0.05),
    "cornell": dict(dataset="cornell", model="gatv2", layers=2, hidden=64, heads=1, lr=0.05),
    "pubmed": dict(dataset="pubmed", model="gat", layers=5, hidden=64, heads=8, lr=0.05),
}


def _load(name: str):
    from zoo.datasets import load

    return load(name, transforms=["normalize_features"])


# --------------------------------------------------------------------------- the plain PyG loop


def synchronised_clock(clock: Callable[[], float], device: torch.device) -> Callable[[], float]:
    """``clock``, read after the device's queued work is done (CUDA: ``torch.cuda.synchronize``)."""
    if device.type != "cuda":
        return clock

    def now() -> float:
        torch.cuda.synchronize(device)
        return clock()

    return now


def warmup_epochs(device: torch.device) -> int:
    """Epochs run before a timing: 1 on the CPU; 3 on a GPU (kernel compilation, allocator pools)."""
    return 3 if device.type == "cuda" else 1


def time_pyg(task, c: dict, epochs: int) -> float:
    """Seconds per epoch of a plain PyG loop (train step + eval forward + accuracies)."""
    d = task.data
    torch.manual_seed(0)
    model = pyg_model(c, task.num_features, task.num_classes).to(_device)
    opt = torch.optim.SGD(model.parameters(), lr=c["lr"])
    x, ei, y = d.x.to(_device), d.edge_index.to(_device), d.y.to(_device)
    masks = [m.to(_device) for m in (d.train_mask, d.val_mask, d.test_mask)]

    def epoch() -> None:
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, ei)[masks[0]], y[masks[0]])
        loss.backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, ei).argmax(-1)
            [float((pred[m] == y[m]).float().mean()) for m in masks]

    for _ in range(warmup_epochs(_device)):
        epoch()
    start = _clock()
    for _ in range(epochs):
        epoch()
    return (_clock() - start) / epochs


# --------------------------------------------------------------------------- ours


def time_ours(task, c: dict, replicas: int, epochs: int, stacked: bool = True, cuda_graphs: str = "auto") -> float:
    """Seconds per replica-epoch of ``train_replicas`` on ``replicas`` stacked replicas.  On CUDA the
    steady state only: a run of ``epochs`` more epochs than a short one, the difference of their times
    (the warm-up, the graphs' capture and self-check and the last, eager, epoch cancel; no callback
    enters the loop)."""
    from zoo.trainer.graphs import WARMUP

    inits = [INITS[i % len(INITS)] for i in range(replicas)]
    seeds = [i // len(INITS) for i in range(replicas)] if replicas > 1 else [0]

    def factory(init: str) -> Callable[[], torch.nn.Module]:
        return lambda: zoo.build(c["model"], in_dim=task.num_features, out_dim=task.num_classes,
                                 hidden_dim=c["hidden"], num_layers=c["layers"], heads=c["heads"], init=init)

    def run(total: int) -> float:
        # loss_threshold=0, no patience: every replica runs exactly `total` epochs
        cfg = TrainConfig(optimizer="sgd", lr=c["lr"], epochs=total, loss_threshold=0.0, cuda_graphs=cuda_graphs)
        reps, view = build_replicas(task, [factory(i) for i in inits], seeds, _device, torch.float32, cfg, stacked)
        start = _clock()
        train_replicas(task, reps, view, cfg, seeds)
        return _clock() - start

    run(warmup_epochs(_device))
    if _device.type == "cuda":
        short = WARMUP + 2  # the capture's epoch, one replayed, the last
        return (run(short + epochs) - run(short)) / (epochs * replicas)
    return run(epochs) / (epochs * replicas)


def machine() -> str:
    if _device.type == "cuda":
        return (f"{torch.cuda.get_device_name(_device)}, torch {torch.__version__}, "
                f"CUDA {torch.version.cuda}, {os.cpu_count()} CPU cores")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"load average {load:.2f} at start")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default="cora,cornell,pubmed")
    p.add_argument("--replicas", default="1,15")
    p.add_argument("--epochs", type=int, default=None, help="epochs per timing (default 20, --quick 5)")
    p.add_argument("--repeat", type=int, default=None, help="timings per figure, best kept (default 3, --quick 1)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall",
                   help="wall time (default) or process CPU time (steadier on a shared machine)")
    p.add_argument("--plain-allocator", action="store_true",
                   help="leave glibc's allocator as it is (zoo._allocator.tune_allocator off) for both sides")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]: both sides run there")
    p.add_argument("--cuda-graphs", default="auto",
                   help="ours with cuda_graphs = each of these (comma-separated of auto, on, off; default auto)")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    global _clock, _device
    _device = torch.device(args.device)
    if _device.type == "cuda" and args.clock == "cpu":
        p.error("--clock cpu times the host only; on --device cuda the timing is the synchronised wall clock")
    if _device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device (torch {torch.__version__})")
    _clock = synchronised_clock(CLOCK[args.clock], _device)
    if args.plain_allocator:
        os.environ["ZOO_TUNE_ALLOCATOR"] = "0"
    # both sides run with the same allocator settings (train_replicas would tune it anyway)
    tuned = tune_allocator()
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    if args.threads:
        torch.set_num_threads(args.threads)
    epochs = args.epochs or (5 if args.quick else 20)
    repeat = args.repeat or (1 if args.quick else 3)
    counts = [int(r) for r in args.replicas.split(",")]
    modes = [m for m in args.cuda_graphs.split(",") if m]
    if any(m not in ("auto", "on", "off") for m in modes):
        p.error(f"--cuda-graphs: each of auto, on, off; got {args.cuda_graphs!r}")
    columns = [(r, m) for r in counts for m in modes]
    name_of = {(r, m): f"R={r}" + (f" {m}" if len(modes) > 1 else "") for r, m in columns}
    print(f"machine: {machine()}; allocator tuned (both sides): {tuned}")
    clock = "wall clock, CUDA-synchronised" if _device.type == "cuda" else f"{args.clock} clock"
    steady = " (steady state: after the warm-up, capture and self-check, before the last epoch)" \
        if _device.type == "cuda" else ""
    print(f"{epochs} epochs per timing{steady}, best of {repeat}, {clock}; ms per replica-epoch "
          "(train step + per-epoch evaluation)")
    header = f"{'config':34} {'PyG loop':>9}" + "".join(f" {'ours ' + name_of[k]:>10} {'ratio':>6}" for k in columns)
    print(header)
    print("-" * len(header))
    rows: List[Dict[str, object]] = []
    for name in args.configs.split(","):
        c = CONFIGS[name]
        task = _load(c["dataset"])
        pyg, ours = float("inf"), {k: float("inf") for k in columns}
        for _ in range(repeat):  # interleaved, so load changes hit both sides
            pyg = min(pyg, time_pyg(task, c, epochs))
            for r, m in columns:
                ours[r, m] = min(ours[r, m], time_ours(task, c, r, epochs, cuda_graphs=m))
        label = f"{c['dataset']} {c['model']} L={c['layers']} w{c['hidden']}" + (f" {c['heads']}h" if c["heads"] > 1 else "")
        line = f"{label:34} {1e3 * pyg:>9.2f}" + "".join(f" {1e3 * ours[k]:>10.2f} {ours[k] / pyg:>5.2f}x" for k in columns)
        print(line, flush=True)
        rows.append({"config": label, "pyg_ms": 1e3 * pyg,
                     "ours": [{"replicas": r, "cuda_graphs": m, "ms": 1e3 * ours[r, m], "ratio": ours[r, m] / pyg}
                              for r, m in columns]})
    print("targets: ratio <= 0.40x at R=1, <= 0.10x at R=15")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "epochs": epochs, "repeat": repeat, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
