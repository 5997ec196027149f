"""Rank collapse vs Dirichlet energy by depth, at initialisation: does the energy see what the rank sees?

For each ``model:init`` pair, one model of ``--layers`` layers (width ``--hidden``, seed 0, eval mode)
is applied to ``--dataset``'s features, and every layer's output is measured with
:func:`zoo.diagnostics.rank.rank_trace` (effective rank: exp of the entropy of the normalised
singular values) and :func:`zoo.diagnostics.oversmoothing.energy_trace` (Dirichlet energy).
Printed at layers 1, 2, 4, ... and the last.

Result (2026-11-28, Cora, 64 layers, width 64; ``python research/probe_rank_vs_energy.py``):

=================  ==========================================  ==========================================
model:init         effective rank, layers 1 / 2 / 4 / 8 / 16 / 32  Dirichlet energy, same layers
=================  ==========================================  ==========================================
gat:xavier         53.9 / 39.8 / 28.0 / 18.4 / 6.8 / 3.0      4.7e-1 / 5.7e-2 / 3.2e-3 / 4.5e-5 / 1.6e-8 / 6.8e-14
gat:bal_o          52.8 / 50.4 / 47.9 / 44.5 / 41.1 / 38.2    4.9e-1 / 1.6e-1 / 5.3e-2 / 1.8e-2 / 5.5e-3 / 1.5e-3
gcn:xavier         54.2 / 41.3 / 28.7 / 15.6 / 7.1 / 4.4      1.1 / 3.7e-1 / 7.8e-2 / 2.8e-3 / 1.2e-5 / 3.0e-11
=================  ==========================================  ==========================================

Xavier's energy keeps falling by orders of magnitude per layer (4.3e-26 at the 64th, the 7-class
output layer) while its effective rank settles at 2-3 from layer 32 on: past a few dozen layers the
energy measures the features' scale, the rank their collapse.  Bal_O keeps 38 of 64 directions at
layer 32 and 6.2 of the output's 7 (energy 9.4e-4).
"""
from __future__ import annotations

import argparse
from typing import Dict, List, Sequence

import torch

import zoo
from zoo.datasets import load
from zoo.diagnostics.oversmoothing import energy_trace
from zoo.diagnostics.rank import rank_trace


def layers_shown(num_layers: int) -> List[int]:
    """1, 2, 4, ... below ``num_layers``, then ``num_layers`` (1-based)."""
    shown, k = [], 1
    while k < num_layers:
        shown.append(k)
        k *= 2
    return shown + [num_layers]


def traces(model_name: str, init: str, task, num_layers: int, hidden: int) -> Dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = zoo.build(model_name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=hidden,
                      num_layers=num_layers, init=init).eval()
    graph, x = task.data.edge_index, task.data.x
    with torch.no_grad():
        return {"effective rank": rank_trace(model, graph, x, "effective_rank"),
                "Dirichlet energy": energy_trace(model, graph, x, "dirichlet")}


def main(argv: Sequence[str] = ()) -> Dict[str, Dict[str, torch.Tensor]]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="*", default=["gat:xavier", "gat:bal_o", "gcn:xavier"], help="model:init")
    p.add_argument("--dataset", default="cora")
    p.add_argument("--layers", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    args = p.parse_args(list(argv))
    task = load(args.dataset)
    out = {}
    for pair in args.pairs:
        model_name, init = pair.split(":")
        out[pair] = traces(model_name, init, task, args.layers, args.hidden)
        shown = layers_shown(args.layers)
        print(f"{pair}: layer " + " ".join(f"{i:>9d}" for i in shown))
        for name, t in out[pair].items():
            print(f"  {name:<17}" + " ".join(f"{float(t[i - 1]):9.3g}" for i in shown))
    return out


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
