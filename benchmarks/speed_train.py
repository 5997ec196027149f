"""Training throughput: ms per replica-epoch of the zoo's training path vs a plain PyG loop.

"Ours" is the runner's real path (``zoo.trainer.replicas.build_replicas`` + ``train_replicas``: one
training step and the per-epoch evaluation / selection / stopping of the protocol), with 1
replica and with 15 stacked replicas (3 inits x 5 seeds).  "PyG" is what a user would write: a
stack of ``GATv2Conv`` / ``GATConv`` / ``GCNConv`` with ReLU, ``torch.optim.SGD``, one training
step and one eval forward (train / val / test accuracy) per epoch.  Both run in this process, one
after the other, ``--repeat`` times (the best time of each is kept), so the ratio is meaningful
even on a loaded machine.  ``--clock cpu`` times process CPU time instead of wall time (steadier
when other processes share the cores; use it with ``--threads 1``).

    python benchmarks/speed_train.py            # Cora gatv2 L=10 w64, Cornell gatv2 L=2, PubMed gat L=5 8x8
    python benchmarks/speed_train.py --quick    # fewer epochs, one repeat
    python benchmarks/speed_train.py --configs cornell --threads 1

Targets: ours / PyG <= 0.4 at 1 replica and <= 0.1 at 15 replicas.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F

import zoo
from zoo.trainer.allocator import tune_allocator
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter
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


def _pyg_model(c: dict, in_dim: int, out_dim: int) -> torch.nn.Module:
    from torch_geometric.nn import GATConv, GATv2Conv, GCNConv

    heads, L = c["heads"], c["layers"]

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            convs = []
            for i in range(L):
                last = i == L - 1
                d_in = in_dim if i == 0 else c["hidden"]
                if c["model"] == "gcn":
                    convs.append(GCNConv(d_in, out_dim if last else c["hidden"], bias=False))
                    continue
                conv = GATv2Conv if c["model"] == "gatv2" else GATConv
                kw = dict(share_weights=True) if c["model"] == "gatv2" else {}
                convs.append(conv(d_in, out_dim if last else c["hidden"] // heads, heads=heads,
                                  concat=not last, bias=False, **kw))
            self.convs = torch.nn.ModuleList(convs)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < L - 1:
                    x = F.relu(x)
            return x

    return Net()


def time_pyg(task, c: dict, epochs: int) -> float:
    """Seconds per epoch of a plain PyG loop (train step + eval forward + accuracies)."""
    d = task.data
    torch.manual_seed(0)
    model = _pyg_model(c, task.num_features, task.num_classes)
    opt = torch.optim.SGD(model.parameters(), lr=c["lr"])
    x, ei, y = d.x, d.edge_index, d.y
    masks = [d.train_mask, d.val_mask, d.test_mask]

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

    epoch()  # warm-up
    start = _clock()
    for _ in range(epochs):
        epoch()
    return (_clock() - start) / epochs


# --------------------------------------------------------------------------- ours


def time_ours(task, c: dict, replicas: int, epochs: int, stacked: bool = True) -> float:
    """Seconds per replica-epoch of ``train_replicas`` on ``replicas`` stacked replicas."""
    inits = [INITS[i % len(INITS)] for i in range(replicas)]
    seeds = [i // len(INITS) for i in range(replicas)] if replicas > 1 else [0]

    def factory(init: str) -> Callable[[], torch.nn.Module]:
        return lambda: zoo.build(c["model"], in_dim=task.num_features, out_dim=task.num_classes,
                                 hidden_dim=c["hidden"], num_layers=c["layers"], heads=c["heads"], init=init)

    # loss_threshold=0, no patience: every replica runs exactly `epochs` epochs
    cfg = TrainConfig(optimizer="sgd", lr=c["lr"], epochs=epochs, loss_threshold=0.0)
    reps, view = build_replicas(task, [factory(i) for i in inits], seeds, torch.device("cpu"), torch.float32,
                                cfg, stacked)
    train_replicas(task, reps, view, TrainConfig(**{**cfg.__dict__, "epochs": 1}), seeds)  # warm-up
    reps, view = build_replicas(task, [factory(i) for i in inits], seeds, torch.device("cpu"), torch.float32,
                                cfg, stacked)
    start = _clock()
    train_replicas(task, reps, view, cfg, seeds)
    return (_clock() - start) / (epochs * replicas)


def machine() -> str:
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
                   help="leave glibc's allocator as it is (zoo.trainer.allocator.tune_allocator off) for both sides")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    global _clock
    _clock = CLOCK[args.clock]
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
    print(f"machine: {machine()}; allocator tuned (both sides): {tuned}")
    print(f"{epochs} epochs per timing, best of {repeat}, {args.clock} clock; ms per replica-epoch (train step + per-epoch evaluation)")
    header = f"{'config':34} {'PyG loop':>9}" + "".join(f" {f'ours R={r}':>10} {'ratio':>6}" for r in counts)
    print(header)
    print("-" * len(header))
    rows: List[Tuple[str, float, List[float]]] = []
    for name in args.configs.split(","):
        c = CONFIGS[name]
        task = _load(c["dataset"])
        pyg, ours = float("inf"), {r: float("inf") for r in counts}
        for _ in range(repeat):  # interleaved, so load changes hit both sides
            pyg = min(pyg, time_pyg(task, c, epochs))
            for r in counts:
                ours[r] = min(ours[r], time_ours(task, c, r, epochs))
        label = f"{c['dataset']} {c['model']} L={c['layers']} w{c['hidden']}" + (f" {c['heads']}h" if c["heads"] > 1 else "")
        line = f"{label:34} {1e3 * pyg:>9.2f}" + "".join(f" {1e3 * ours[r]:>10.2f} {ours[r] / pyg:>5.2f}x" for r in counts)
        print(line, flush=True)
        rows.append((label, pyg, [ours[r] for r in counts]))
    print("targets: ratio <= 0.40x at R=1, <= 0.10x at R=15")


if __name__ == "__main__":
    main()
