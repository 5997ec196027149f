"""GATv2 with an attention bias: the bias folded into the target rows vs added on every edge.

``a^T LeakyReLU(W h_u + W h_v + b)``: :func:`zoo.ops.dispatch.fold_node_terms` adds ``b`` to the
target rows once (an ``(N, H, C)`` add), so the score keeps the plain form that the fused score
kernel and the compiled op take; the reference turns the fold off, which is the previous path (an
``(E, H, C)`` pre-activation on the plain ops).  Times the runner's training path
(``build_replicas`` + ``train_replicas``: one step and the per-epoch evaluation) for the Oxford
report's GATv2 (a) (8 heads x 8, shared weights, attention bias, dropout 0.6 on features and
attention); both sides alternate in this process, ``--repeat`` times, the best of each kept.

    python benchmarks/speed_attention_bias.py --dataset amazon_photo --clock cpu --threads 1
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List

import torch

from zoo.ops import dispatch
from zoo._allocator import tune_allocator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from speed_dropout import CLOCK, time_train  # noqa: E402  (the same training-path timing)

MODEL = dict(model="gatv2", num_layers=2, hidden_dim=64, heads=8, share_weights=True, attention_bias=True,
             dropout=0.6, attn_dropout=0.6)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="cora")
    p.add_argument("--replicas", default="1,5")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall")
    args = p.parse_args()
    tune_allocator()
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    if args.threads:
        torch.set_num_threads(args.threads)
    from zoo.datasets import load

    task = load(args.dataset)
    fold = dispatch.fold_node_terms
    print(f"{args.dataset}, {args.epochs} epochs per timing, best of {args.repeat}, {args.clock} clock, "
          f"{torch.get_num_threads()} torch thread(s), load average {os.getloadavg()[0]:.2f}; ms per replica-epoch")
    print(f"{'R':>3} {'bias on edges':>14} {'bias folded':>12} {'ratio':>6}")
    for r in [int(v) for v in args.replicas.split(",")]:
        best: Dict[str, List[float]] = {"edges": [], "folded": []}
        for _ in range(args.repeat):
            for mode in ("edges", "folded"):
                # the reference: nothing folded (the dispatch reads the module's name at each call)
                dispatch.fold_node_terms = fold if mode == "folded" else (lambda x_src, x_dst, terms: (x_dst, tuple(terms)))
                try:
                    best[mode].append(time_train(task, MODEL, r, args.epochs, CLOCK[args.clock]))
                finally:
                    dispatch.fold_node_terms = fold
        old, new = min(best["edges"]) * 1e3, min(best["folded"]) * 1e3
        print(f"{r:>3} {old:>14.1f} {new:>12.1f} {new / old:>6.2f}")


if __name__ == "__main__":
    main()
