"""Forward+backward time of one attention layer: gat-zoo vs PyTorch Geometric, same process.

Compares our ``gat``/``gatv2`` layers with PyG ``GATConv``/``GATv2Conv`` at equal settings
(8 heads x 8 channels, 64 input features, self-loops added, no bias, no dropout) on a
Cora-size graph and on a 100k-node / 1M-edge random graph, on the CPU and on CUDA when
available, and prints the ratio ours / PyG (target <= 1.0).

Both sides are called as users call them: PyG with ``conv(x, edge_index)`` (it re-adds
self-loops every call), ours through the model's graph input path ``as_graph(edge_index, x)``,
which validates and re-indexes a graph once and then hits a cache.

    python benchmarks/speed_layers.py [--repeats 10] [--devices cpu cuda] [--sizes cora large]
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List

import torch
from torch_geometric.nn import GATConv, GATv2Conv

from zoo.graph import as_graph
from zoo.models.gat import GATLayer
from zoo.models.gatv2 import GATv2Layer

SIZES = {"cora": (2708, 10556), "large": (100_000, 1_000_000)}
HEADS, CHANNELS, IN_DIM = 8, 8, 64


def random_graph(num_nodes: int, num_edges: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, num_nodes, (2, num_edges), generator=g).to(device)


def time_fn(fn: Callable[[], None], repeats: int, device: str) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after two warm-up runs."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pair(kind: str):
    if kind == "gat":
        ours = GATLayer(IN_DIM, CHANNELS, HEADS, concat=True)
        ref = GATConv(IN_DIM, CHANNELS, heads=HEADS, concat=True, bias=False)
    else:
        ours = GATv2Layer(IN_DIM, CHANNELS, HEADS, concat=True)
        ref = GATv2Conv(IN_DIM, CHANNELS, heads=HEADS, concat=True, bias=False, share_weights=True)
    return ours, ref


def run(devices: List[str], sizes: List[str], repeats: int) -> List[Dict]:
    rows = []
    for device in devices:
        for size in sizes:
            n, e = SIZES[size]
            edge_index = random_graph(n, e, device) if size != "cora" else random_graph(n, e, device)
            x = torch.randn(n, IN_DIM, device=device, requires_grad=True)
            for kind in ("gat", "gatv2"):
                ours, ref = (m.to(device) for m in pair(kind))

                def step_ours():
                    out, _ = ours(as_graph(edge_index, x), x)
                    out.sum().backward()

                def step_ref():
                    ref(x, edge_index).sum().backward()

                t_ours = time_fn(step_ours, repeats, device)
                t_ref = time_fn(step_ref, repeats, device)
                rows.append(dict(device=device, graph=f"{size} ({n} nodes, {e} edges)", layer=kind,
                                 ours_ms=1e3 * t_ours, pyg_ms=1e3 * t_ref, ratio=t_ours / t_ref))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--devices", nargs="+", default=["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}; forward+backward per layer, median of {args.repeats}; "
          f"{HEADS} heads x {CHANNELS} channels, in_dim {IN_DIM}")
    print(f"{'device':6} {'layer':6} {'graph':36} {'ours ms':>9} {'PyG ms':>9} {'ours/PyG':>9}")
    for r in run(args.devices, args.sizes, args.repeats):
        print(f"{r['device']:6} {r['layer']:6} {r['graph']:36} {r['ours_ms']:9.2f} {r['pyg_ms']:9.2f} {r['ratio']:9.2f}")


if __name__ == "__main__":
    main()
