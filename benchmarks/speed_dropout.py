"""Input dropout on bag-of-words features: a mask drawn at the non-zeros only vs one draw per entry.

Times the runner's real training path (``build_replicas`` + ``train_replicas``: one step and the
per-epoch evaluation) on Cora for models that drop out their 2708 x 1433 input (1.3 % non-zero):
the nonlocal paper's 2-layer SAN (input dropout 0.5) and LipschitzNorm Table 1's GCN / GAT with
dropout 0.5.  "dense" sets ``zoo.ops.dropout.SPARSE_DROPOUT_MIN_ELEMENTS`` out of reach, which is
the old path (a Bernoulli draw per entry); both run in this process, alternating, ``--repeat``
times, the best of each kept, so the ratio holds on a loaded machine (use ``--clock cpu``).

    python benchmarks/speed_dropout.py --clock cpu --threads 1

``--draw [--dataset NAME]``: the keep masks' draw instead.  Times the same training path for the
Oxford report's GAT (8 heads, dropout 0.6 on features and attention) with each replica's masks
drawn by ``zoo.ops.dropout.keep_draws`` (uniforms compared with the keep probability) against
``Tensor.bernoulli_`` from the same stream (the previous draw, kept here as the reference), and
the two draws alone on 2 M entries.

    python benchmarks/speed_dropout.py --draw --dataset amazon_photo --clock cpu --threads 1
"""
from __future__ import annotations

import argparse
import importlib
import os
import time
from typing import Callable, Dict, List

import torch

import zoo
from zoo._allocator import tune_allocator
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
CONFIGS: Dict[str, dict] = {
    "san_pre_ln L=2 (nonlocal)": dict(model="san_pre_ln", num_layers=2, hidden_dim=32, input_dropout=0.5),
    "gcn L=2 dropout 0.5 (LN Table 1)": dict(model="gcn", num_layers=2, hidden_dim=64, dropout=0.5),
    "gat L=2 dropout 0.5 (LN Table 1)": dict(model="gat", num_layers=2, hidden_dim=64, dropout=0.5),
}
DRAW_CONFIGS: Dict[str, dict] = {
    "gat L=2 8 heads dropout 0.6 (Oxford T4)": dict(model="gat", num_layers=2, hidden_dim=64, heads=8,
                                                    dropout=0.6, attn_dropout=0.6),
}
_DROPOUT = importlib.import_module("zoo.ops.dropout")  # the module; zoo.ops.dropout is also the function


def time_train(task, kwargs: dict, replicas: int, epochs: int, clock: Callable[[], float]) -> float:
    """Seconds per replica-epoch of ``train_replicas`` on ``replicas`` stacked replicas."""
    seeds = list(range(replicas))

    def factory() -> torch.nn.Module:
        return zoo.build(kwargs["model"], in_dim=task.num_features, out_dim=task.num_classes,
                         **{k: v for k, v in kwargs.items() if k != "model"})

    cfg = TrainConfig(optimizer="adam", lr=0.005, epochs=epochs, loss_threshold=0.0)
    reps, view = build_replicas(task, [factory] * replicas, seeds, torch.device("cpu"), torch.float32, cfg, True)
    train_replicas(task, reps, view, TrainConfig(**{**cfg.__dict__, "epochs": 1}), seeds)  # warm-up
    start = clock()
    train_replicas(task, reps, view, cfg, seeds)
    return (clock() - start) / (epochs * replicas)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", default="1,5")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall")
    p.add_argument("--draw", action="store_true", help="compare the keep masks' draw (uniform < q vs bernoulli_)")
    p.add_argument("--dataset", default="cora", help="with --draw: the graph (e.g. amazon_photo, 16x Cora's edges)")
    args = p.parse_args()
    tune_allocator()
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    if args.threads:
        torch.set_num_threads(args.threads)
    from zoo.datasets import load

    if args.draw:
        compare_draws(load(args.dataset), args)
        return
    task = load("cora")
    sparse_min = _DROPOUT.SPARSE_DROPOUT_MIN_ELEMENTS
    load_avg = os.getloadavg()[0]
    print(f"Cora, {args.epochs} epochs per timing, best of {args.repeat}, {args.clock} clock, "
          f"{torch.get_num_threads()} torch thread(s), load average {load_avg:.2f} at start; ms per replica-epoch")
    print(f"{'model':34} {'R':>3} {'dense mask':>11} {'non-zeros':>10} {'ratio':>6}")
    for name, kwargs in CONFIGS.items():
        for r in [int(v) for v in args.replicas.split(",")]:
            best: Dict[str, List[float]] = {"dense": [], "sparse": []}
            for _ in range(args.repeat):
                for mode in ("dense", "sparse"):
                    _DROPOUT.SPARSE_DROPOUT_MIN_ELEMENTS = 2 ** 62 if mode == "dense" else sparse_min
                    best[mode].append(time_train(task, kwargs, r, args.epochs, CLOCK[args.clock]))
            _DROPOUT.SPARSE_DROPOUT_MIN_ELEMENTS = sparse_min
            dense, sparse = min(best["dense"]) * 1e3, min(best["sparse"]) * 1e3
            print(f"{name:34} {r:>3} {dense:>11.1f} {sparse:>10.1f} {sparse / dense:>6.2f}")


def bernoulli_draws(shape, q, generator, dtype, device) -> torch.Tensor:
    """The reference: ``Tensor.bernoulli_`` from the same stream (the draw before keep_draws)."""
    return torch.empty(shape, dtype=dtype, device=device).bernoulli_(q, generator=generator)


def compare_draws(task, args: argparse.Namespace) -> None:
    """ms per replica-epoch with the masks drawn by bernoulli_ (reference) and by keep_draws."""
    clock = CLOCK[args.clock]
    draws = {"bernoulli_": bernoulli_draws, "keep_draws": _DROPOUT.keep_draws}
    g = torch.Generator().manual_seed(0)
    alone = {}
    for name, draw in draws.items():
        times = []
        for _ in range(args.repeat):
            start = clock()
            draw((2_000_000,), 0.4, g, torch.float32, torch.device("cpu"))
            times.append(clock() - start)
        alone[name] = min(times) * 1e3
    print(f"2 M draws: bernoulli_ {alone['bernoulli_']:.1f} ms, keep_draws {alone['keep_draws']:.1f} ms, "
          f"ratio {alone['keep_draws'] / alone['bernoulli_']:.2f}")
    print(f"{args.dataset}, {args.epochs} epochs per timing, best of {args.repeat}, {args.clock} clock, "
          f"{torch.get_num_threads()} torch thread(s), load average {os.getloadavg()[0]:.2f}; ms per replica-epoch")
    print(f"{'model':40} {'R':>3} {'bernoulli_':>11} {'keep_draws':>11} {'ratio':>6}")
    for name, kwargs in DRAW_CONFIGS.items():
        for r in [int(v) for v in args.replicas.split(",")]:
            best: Dict[str, List[float]] = {k: [] for k in draws}
            for _ in range(args.repeat):
                for mode, draw in draws.items():
                    _DROPOUT.keep_draws = draw  # ReplicaRandomness reads the module's name at each draw
                    try:
                        best[mode].append(time_train(task, kwargs, r, args.epochs, clock))
                    finally:
                        _DROPOUT.keep_draws = draws["keep_draws"]
            old, new = min(best["bernoulli_"]) * 1e3, min(best["keep_draws"]) * 1e3
            print(f"{name:40} {r:>3} {old:>11.1f} {new:>11.1f} {new / old:>6.2f}")


if __name__ == "__main__":
    main()
