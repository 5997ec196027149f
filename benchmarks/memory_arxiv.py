"""Peak memory and time of full-batch GAT / GATv2 training on an ogbn-arxiv-shaped graph (CPU).

    python benchmarks/memory_arxiv.py                     # full arxiv shape (needs ~20 GB free)
    python benchmarks/memory_arxiv.py --scale 0.05        # quick check
    python benchmarks/memory_arxiv.py --scale 0.25 --depth-scale 0.1 --out results/memory_arxiv.json

Graph: ogbn-arxiv's shape (169,343 nodes, 1,166,243 directed edges, 128 features, 40 classes)
times ``--scale``, power-law (Chung-Lu) degrees, seeded.  Model: 3 layers, 8 heads x 32
channels (hidden 256), output layer 1 head x 40 classes, no dropout; self-loops added (GAT's
default).  One measurement = one forward + backward of the cross-entropy on all nodes.

For every configuration a fresh worker process measures:

* ``peak``: the rise of the process's peak RSS (``VmHWM``, reset through
  ``/proc/self/clear_refs``) over the RSS just before the forward pass (graph, features and
  parameters already resident);
* ``saved``: the bytes autograd keeps for the backward, from ``saved_tensors_hooks``: unique
  storages packed during the forward, less the ones that existed before it (inputs,
  parameters, the graph) — the lower bound of any implementation of the same autograd graph;
* the ratio ``peak / saved`` (target <= 2) and the saved ``(E, H, C)``-sized tensors;
* time per epoch: forward + backward + Adam step (mean of ``--repeat`` epochs after one warm-up).

A depth sweep then compares ``recompute=False`` / ``True`` at ``--depths`` on a graph of
``--depth-scale``.  The script holds a lock file so that two copies never run at once (the
machine is shared); numbers on a loaded machine: compare ratios, not absolute times.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

ARXIV = {"nodes": 169_343, "edges": 1_166_243, "features": 128, "classes": 40}
LOCK = Path(tempfile.gettempdir()) / "gat-zoo-memory_arxiv.lock"


# --------------------------------------------------------------------------- worker (one config)


def arxiv_shaped_graph(scale: float, seed: int = 0):
    """A directed graph with power-law degrees and arxiv's node / edge counts times ``scale``;
    random features and labels.  Uses ``zoo.datasets.synthetic.power_law_digraph`` (the
    ``arxiv_like`` dataset's generator) where the zoo has it, else a Chung-Lu draw here."""
    import torch

    g = torch.Generator().manual_seed(seed)
    n = max(100, int(ARXIV["nodes"] * scale))
    e = max(500, int(ARXIV["edges"] * scale))
    try:
        from zoo.datasets.synthetic import power_law_digraph
    except ImportError:
        rank = torch.arange(1, n + 1, dtype=torch.float64)
        weight = rank ** (-1.0 / (2.1 - 1.0))  # Zipf weights -> degree tail P(k) ~ k^-2.1
        src = torch.multinomial(weight[torch.randperm(n, generator=g)], e, replacement=True, generator=g)
        dst = torch.multinomial(weight[torch.randperm(n, generator=g)], e, replacement=True, generator=g)
        edge_index = torch.stack([src, dst])
    else:
        edge_index = power_law_digraph(n, e, g)
    x = torch.randn(n, ARXIV["features"], generator=g)
    y = torch.randint(0, ARXIV["classes"], (n,), generator=g)
    return edge_index, x, y


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        return True
    except OSError:
        return False


def measure(cfg: Dict[str, Any]) -> Dict[str, Any]:
    import torch
    import torch.nn.functional as F

    import zoo
    from zoo.graph import as_graph

    torch.set_num_threads(int(cfg["threads"]))
    if cfg.get("legacy"):  # the autograd graph before the memory fixes, for a same-run comparison
        import zoo.ops.dispatch as dispatch
        import zoo.ops.segment as segment

        segment._SAVE_FREE_MIN_NUMEL = 1 << 62  # index_add keeps its (E, H, C) source again
        dispatch.leaky_relu_dot = lambda h, a, s: (F.leaky_relu(h, s) * a).sum(-1)
        dispatch.weight_messages = lambda w, v: w.unsqueeze(-1) * v
    torch.manual_seed(0)
    edge_index, x, y = arxiv_shaped_graph(cfg["scale"])
    model = zoo.build(cfg["model"], in_dim=x.size(1), out_dim=ARXIV["classes"], hidden_dim=cfg["heads"] * cfg["channels"],
                      num_layers=cfg["layers"], heads=cfg["heads"], out_heads=1, recompute=cfg["recompute"])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = as_graph(edge_index, x, model.self_loops)  # normalised once, as in training
    E, H, C = g.num_edges, cfg["heads"], cfg["channels"]

    before = {t.untyped_storage().data_ptr() for t in [x, y, edge_index, g.edge_index, *model.parameters()]}
    packed: Dict[int, int] = {}
    ehc: Dict[int, List[int]] = {}

    def pack(t):
        s = t.untyped_storage()
        ptr = s.data_ptr()
        if ptr not in before and ptr not in packed:
            packed[ptr] = s.nbytes()
            if t.dim() >= 2 and t.size(0) == E and t.numel() >= E * H * C // 2:
                ehc[ptr] = list(t.shape)
        return t

    rss0 = _status("VmRSS")
    exact = _reset_peak()
    t0 = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = F.cross_entropy(model(g, x), y)
    saved = sum(packed.values())
    loss.backward()
    first = time.perf_counter() - t0
    peak = _status("VmHWM") - rss0
    opt.step()
    opt.zero_grad(set_to_none=True)
    times = []
    for _ in range(int(cfg["repeat"])):
        t0 = time.perf_counter()
        F.cross_entropy(model(g, x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    return {**cfg, "nodes": g.num_nodes, "edges_with_loops": E, "peak_bytes": peak, "saved_bytes": saved,
            "ratio": peak / saved if saved else None, "saved_ehc": list(ehc.values()),
            "ehc_bytes": E * H * C * 4, "time_first_s": first,
            "time_per_epoch_s": sum(times) / len(times) if times else first, "exact_peak": exact}


# --------------------------------------------------------------------------- driver


def run_worker(cfg: Dict[str, Any]) -> Dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True)
    sys.stdout.flush()
    if proc.returncode != 0:
        return {**cfg, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gib(b: float) -> str:
    return f"{b / 2 ** 30:.2f}"


def main(argv: List[str] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--scale", type=float, default=1.0, help="fraction of arxiv's nodes and edges (default 1)")
    p.add_argument("--models", nargs="+", default=["gat", "gatv2"])
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--depths", type=int, nargs="*", default=[3, 16], help="depth sweep (gatv2), [] to skip")
    p.add_argument("--depth-scale", type=float, default=None, help="graph scale of the depth sweep (default --scale)")
    p.add_argument("--repeat", type=int, default=2, help="timed epochs after the measured one")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--legacy", action="store_true",
                   help="also measure the autograd graph as it was before the memory fixes")
    p.add_argument("--out", help="write all results as JSON here")
    args = p.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows in logs as it comes
    if args.worker:
        print(json.dumps(measure(json.loads(args.worker))))
        return 0

    lock = open(LOCK, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"memory_arxiv.py is already running (lock {LOCK}); wait for it: two copies would "
              "distort each other's memory figures", file=sys.stderr)
        return 2
    base = {"layers": args.layers, "heads": args.heads, "channels": args.channels, "repeat": args.repeat,
            "threads": args.threads, "recompute": False}
    results = []
    print(f"# full-batch forward+backward, arxiv shape x {args.scale}, {args.layers} layers, "
          f"{args.heads} heads x {args.channels}; GiB")
    print("model | nodes | edges (+loops) | saved by autograd | peak RSS rise | peak/saved | saved (E,H,C) tensors | s/epoch")
    for model, legacy in [(m, flag) for m in args.models for flag in ([False, True] if args.legacy else [False])]:
        r = run_worker({**base, "model": model, "scale": args.scale, "legacy": legacy})
        results.append(r)
        label = model + (" (before fixes)" if legacy else "")
        if "error" in r:
            print(f"{label} | error: {r['error']}")
            continue
        print(f"{label} | {r['nodes']} | {r['edges_with_loops']} | {gib(r['saved_bytes'])} | {gib(r['peak_bytes'])} | "
              f"{r['ratio']:.2f} | {len(r['saved_ehc'])} x {gib(r['ehc_bytes'])} | {r['time_per_epoch_s']:.2f}")
    if args.depths:
        scale = args.depth_scale or args.scale
        print(f"\n# depth sweep (gatv2), arxiv shape x {scale}")
        print("layers | recompute | saved | peak RSS rise | peak/saved | s/epoch")
        for depth in args.depths:
            for ckpt in (False, True):
                r = run_worker({**base, "model": "gatv2", "scale": scale, "layers": depth, "recompute": ckpt})
                results.append(r)
                if "error" in r:
                    print(f"{depth} | {ckpt} | error: {r['error']}")
                    continue
                print(f"{depth} | {ckpt} | {gib(r['saved_bytes'])} | {gib(r['peak_bytes'])} | {r['ratio']:.2f} | "
                      f"{r['time_per_epoch_s']:.2f}")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
