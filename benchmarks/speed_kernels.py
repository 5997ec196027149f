"""Forward+backward time of one hidden attention layer with and without the fused edge kernels.

For each configuration, one GAT/GATv2 hidden layer (64 inputs) on a real graph, 1 replica or R
stacked under ``vmap`` (each replica with its own input, as a hidden layer has), timed with

* ``compiled``: the compiled attention (``zoo.ops._compiled``: score + softmax + aggregation
  in one C++ op), the default where it builds,
* ``fused``: the torch-op kernels (``zoo.ops.score`` for GATv2's score, ``zoo.ops.aggregate`` for
  the softmax + aggregation),
* ``agg``: the fused aggregation only (GATv2's score from autograd's elementwise ops),
* ``plain``: neither,

interleaved in one process (best of ``--repeat``), and prints the ratios compiled/fused,
compiled/plain, fused/plain and agg/plain.  ``--attn-dropout P`` times the layer with attention
dropout ``P`` while training (the compiled op then stands aside: its column repeats ``fused``;
``agg`` and ``fused`` take the mask inside the sparse product, and ``fused`` has GATv2's fused
score too, so for GATv2 fused/agg is that score's gain under dropout).
``--profile`` prints a ``torch.profiler`` table (CPU self time) of the fused layer instead.
``--host`` prints the host cost of the compiled GATv2 attention instead: microseconds per call of its
forward op, its backward op and the attention's forward + backward through autograd, on an 8-node
graph where the kernels' own work is negligible (on CUDA, timed without synchronising inside the
loop: what the host spends issuing a call), at 1 replica and ``--replicas`` stacked under vmap.

    python benchmarks/speed_kernels.py --threads 1 --clock cpu
    python benchmarks/speed_kernels.py --configs cora-gatv2 --replicas 15 --profile
    python benchmarks/speed_kernels.py --configs pubmed-gat4x64,cora-gat --attn-dropout 0.3
    python benchmarks/speed_kernels.py --host --clock cpu --threads 1 [--device cuda]
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable, Dict, Tuple

import torch
from torch.func import functional_call, stack_module_state, vmap

CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
#: name -> (dataset, layer, heads, channels per head)
CONFIGS: Dict[str, Tuple[str, str, int, int]] = {
    "cora-gatv2": ("cora", "gatv2", 1, 64),
    "cora-gat": ("cora", "gat", 1, 64),
    "pubmed-gat": ("pubmed", "gat", 8, 8),
    "pubmed-gatv2": ("pubmed", "gatv2", 8, 8),
    "pubmed-gat4x64": ("pubmed", "gat", 4, 64),  # the LipschitzNorm authors' DeepGAT width
    "cornell-gatv2": ("cornell", "gatv2", 1, 64),
}
#: name -> zoo.ops.set_fused(kernels, compiled=...) arguments
VARIANTS = {"compiled": (True, True), "fused": (True, False), "agg": ("aggregate", False), "plain": (False, False)}


def make_step(config: str, replicas: int, device: str = "cpu", attn_dropout: float = 0.0) -> Callable[[], None]:
    """One forward+backward of the configured layer (``replicas`` stacked under vmap when > 1) on
    ``device``, training (attention dropout ``attn_dropout`` drawn afresh each call)."""
    from zoo.datasets import load
    from zoo.graph import as_graph
    from zoo.models.gat import GATLayer
    from zoo.models.gatv2 import GATv2Layer

    dataset, kind, heads, channels = CONFIGS[config]
    data = load(dataset).data
    n = data.num_nodes
    torch.manual_seed(0)
    layers = [(GATLayer if kind == "gat" else GATv2Layer)(64, channels, heads, attn_dropout=attn_dropout).to(device)
              for _ in range(replicas)]
    graph = as_graph(data.edge_index.to(device), torch.empty(n, 64, device=device))
    if replicas == 1:
        layer, x = layers[0], torch.randn(n, 64, device=device)

        def step() -> None:
            layer(graph, x)[0].sum().backward()

        return step
    params, buffers = stack_module_state(layers)
    params = {k: v.detach().requires_grad_() for k, v in params.items()}
    xs = torch.randn(replicas, n, 64, device=device)
    batched = vmap(lambda p, b, x: functional_call(layers[0], (p, b), (graph, x))[0], randomness="different")

    def step() -> None:
        batched(params, buffers, xs).sum().backward()

    return step


def set_variant(name: str) -> None:
    import zoo.ops

    kernels, compiled = VARIANTS[name]
    zoo.ops.set_fused(kernels, compiled=compiled)


def time_variants(step: Callable[[], None], repeat: int, clock: Callable[[], float]) -> Dict[str, float]:
    step()
    start = clock()
    step()
    calls = max(1, int(0.3 / max(clock() - start, 1e-4)))  # ~0.3 s per timing
    best = {name: float("inf") for name in VARIANTS}
    for _ in range(repeat):
        for name in VARIANTS:
            set_variant(name)
            step()  # warm-up (first call of a path builds its caches)
            start = clock()
            for _ in range(calls):
                step()
            best[name] = min(best[name], (clock() - start) / calls)
    set_variant("compiled")
    return best


def host_costs(device: str, replicas: int, repeat: int, clock: Callable[[], float]) -> Dict[str, float]:
    """Microseconds per call of the compiled GATv2 attention on an 8-node ring with self-loops:
    ``forward op`` and ``backward op`` (the backend's ops called directly, no autograd) and
    ``fwd+bwd`` (:func:`zoo.ops.dispatch.gatv2_attention` and its backward through autograd, the
    graph's per-graph arguments already built), best of ``repeat``; ``replicas`` > 1: the last one
    under vmap."""
    from zoo.graph import as_graph
    from zoo.ops import dispatch
    from zoo.ops._compiled import ops

    n, c, dev = 8, 16, torch.device(device)
    ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n]).to(dev)
    graph = as_graph(ring, torch.empty(n, c, device=dev))
    backend = ops.backend(dev)
    if backend is None:
        raise SystemExit(f"no compiled attention for {device}: nothing to time")
    args = ops.graph_arguments_of(graph)
    x = torch.randn(replicas, n, 1, c, device=dev, requires_grad=True)
    att = torch.randn(replicas, 1, c, device=dev, requires_grad=True)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def attention(xr: torch.Tensor, ar: torch.Tensor) -> torch.Tensor:
        return dispatch.gatv2_attention(xr, None, ar, graph, 0.2)[0]

    stacked = vmap(attention) if replicas > 1 else (lambda xr, ar: attention(xr[0], ar[0]))
    x0, a0 = x[0].detach(), att[0].detach()
    out, _, lse = backend.gatv2_forward(x0, x0, x0, a0, *args, 0.2)
    grad = torch.ones_like(out)
    calls = {
        "forward op": lambda: backend.gatv2_forward(x0, x0, x0, a0, *args, 0.2),
        "backward op": lambda: backend.gatv2_backward(grad, None, x0, x0, x0, a0, out, lse, *args, 0.2),
        "fwd+bwd": lambda: stacked(x, att).sum().backward(),
    }
    best = {}
    for name, call in calls.items():
        for _ in range(20):
            call()
        sync()
        times = []
        for _ in range(repeat):
            start = clock()
            for _ in range(200):
                call()
            sync()
            times.append((clock() - start) / 200)
        best[name] = 1e6 * min(times)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--replicas", default="1,15")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--clock", choices=sorted(CLOCK), default="wall")
    p.add_argument("--attn-dropout", type=float, default=0.0, help="attention dropout while training")
    p.add_argument("--profile", action="store_true", help="torch.profiler table of the fused layer")
    p.add_argument("--host", action="store_true", help="host microseconds per call of the compiled attention")
    p.add_argument("--device", default="cpu", help="--host: cpu (C++ ops) or cuda (Triton ops)")
    args = p.parse_args()
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    from zoo._allocator import tune_allocator

    tuned = tune_allocator()
    if args.threads:
        torch.set_num_threads(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.host:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clock} clock, load average "
              f"{load:.2f}; host microseconds per call, compiled GATv2 attention on {args.device}, 8 nodes")
        for replicas in (int(r) for r in args.replicas.split(",")):
            costs = host_costs(args.device, replicas, args.repeat, CLOCK[args.clock])
            print(f"R={replicas:<3}" + "".join(f"  {k} {v:8.1f}" for k, v in costs.items()), flush=True)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clock} clock, allocator tuned: "
          f"{tuned}, load average {load:.2f}; ms per forward+backward of one hidden layer")
    for config in args.configs.split(","):
        for replicas in (int(r) for r in args.replicas.split(",")):
            step = make_step(config, replicas, attn_dropout=args.attn_dropout)
            if args.profile:
                from torch.profiler import ProfilerActivity, profile

                for _ in range(2):
                    step()
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(5):
                        step()
                print(f"{config} R={replicas}")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
                continue
            t = time_variants(step, args.repeat, CLOCK[args.clock])
            print(f"{config:14} R={replicas:<3}" + "".join(f" {k} {1e3 * v:9.2f}" for k, v in t.items())
                  + f"   compiled/fused {t['compiled'] / t['fused']:.2f}  compiled/plain {t['compiled'] / t['plain']:.2f}"
                  + f"  fused/plain {t['fused'] / t['plain']:.2f}  agg/plain {t['agg'] / t['plain']:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
