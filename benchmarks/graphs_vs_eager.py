"""Records trained with CUDA graphs against eager ones, on the real datasets: is a replayed group's outcome
the eager group's?

Each configuration is fitted three times in this process with ``zoo.fit`` (the runner's protocol):
once with ``cuda_graphs = "auto"`` and twice eagerly (``"off"``); the two eager fits are the noise
floor (CUDA's atomic scatter-adds make two eager runs differ in the last bits).  For each pair the
script reports, per configuration: how the graph fit ran (``replayed``, ``eager (why)``, ``fell back
(why)``), the replicas whose epochs-to-best, epochs run or stop reason differ, the largest
difference of test accuracy, and the largest difference of the per-epoch validation loss over every
replica and epoch both fits evaluated.  Prints one line per configuration; ``--json FILE`` writes
every figure.

    python benchmarks/graphs_vs_eager.py --device cuda --json out.json          # the four configurations
    python benchmarks/graphs_vs_eager.py --device cpu --quick --double          # a CPU smoke run (see below)

``--double`` (CPU only, for the smoke run of ``make gpu-check``): "graphs" are the tests' CPU double
of a capture (``tests/trainer/capture_double.py``), which checks the static-buffer contract op by op.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
INITS = ("xavier", "balanced_xavier", "balanced_orthogonal")
#: name: (model, dataset, replicas as (seeds, inits), options of zoo.fit)
CONFIGS: Dict[str, Dict[str, Any]] = {
    "cornell_gatv2_L2_R15": dict(model="gatv2", task="cornell_npz", seeds=5, inits=3, num_layers=2, hidden_dim=64,
                                 optimizer="sgd", lr=0.05, epochs=300, loss_threshold=1e-3),
    "cornell_gatv2_L10_R15": dict(model="gatv2", task="cornell_npz", seeds=5, inits=3, num_layers=10, hidden_dim=64,
                                  optimizer="sgd", lr=0.05, epochs=300, loss_threshold=1e-3),
    "cora_gat_8h_dropout_R1": dict(model="gat", task="cora", seeds=1, inits=1, num_layers=2, hidden_dim=64, heads=8,
                                   dropout=0.6, attn_dropout=0.6, optimizer="adam", lr=0.005, weight_decay=5e-4,
                                   epochs=200, patience=100),
    "pubmed_gat_8h_R15": dict(model="gat", task="pubmed", seeds=5, inits=3, num_layers=2, hidden_dim=64, heads=8,
                              dropout=0.6, attn_dropout=0.6, optimizer="adam", lr=0.01, epochs=100, patience=100),
}
#: the smoke run's changes: a few epochs, few replicas
QUICK = dict(epochs=8, seeds=1, inits=2)


def fit(name: str, mode: str, device: str, quick: bool) -> Dict[str, Any]:
    """One fit of configuration ``name`` with ``cuda_graphs = mode``: what the comparison needs."""
    import zoo

    c = {**CONFIGS[name], **(QUICK if quick else {})}
    model, task = c.pop("model"), c.pop("task")
    seeds, inits = list(range(c.pop("seeds"))), list(INITS[:c.pop("inits")])
    start = time.perf_counter()
    h = zoo.fit(model, task, seeds=seeds, inits=inits, device=device, progress=False, cuda_graphs=mode, **c)
    return {"seconds": time.perf_counter() - start,
            "cuda_graphs": sorted({str(r.extra.get("cuda_graphs")) for r in h.results}),
            "epochs_to_best": list(h.best_epoch), "epochs_run": [f["epochs_run"] for f in h.final],
            "stop_reason": [f["stop_reason"] for f in h.final], "test": [f["test"] for f in h.final],
            "val_loss": h.metrics["val_loss"].tolist()}


def compare(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    """How far two fits of one configuration are apart."""
    differ = [r for r in range(len(a["epochs_run"]))
              if (a["epochs_to_best"][r], a["epochs_run"][r], a["stop_reason"][r])
              != (b["epochs_to_best"][r], b["epochs_run"][r], b["stop_reason"][r])]
    tests = [abs(x - y) for x, y in zip(a["test"], b["test"]) if x is not None and y is not None]
    gaps = [abs(x - y) for ra, rb in zip(a["val_loss"], b["val_loss"]) for x, y in zip(ra, rb)
            if math.isfinite(x) and math.isfinite(y)]
    return {"replicas_differing": differ, "largest_test_diff": max(tests, default=0.0),
            "largest_val_loss_diff": max(gaps, default=0.0), "epochs_compared": min(len(a["val_loss"]),
                                                                                   len(b["val_loss"]))}


def run(names: List[str], device: str, quick: bool) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name in names:
        graph, eager, again = (fit(name, m, device, quick) for m in ("auto", "off", "off"))
        out[name] = {"graph": graph, "eager": eager, "eager_again": again,
                     "graph_vs_eager": compare(graph, eager), "eager_vs_eager": compare(again, eager)}
        print(line(name, out[name]), flush=True)
    return out


def line(name: str, r: Dict[str, Any]) -> str:
    g, n = r["graph_vs_eager"], r["eager_vs_eager"]
    return (f"{name}: graph fit {', '.join(r['graph']['cuda_graphs'])} in {r['graph']['seconds']:.1f} s, eager "
            f"{r['eager']['seconds']:.1f} s; graph vs eager: {len(g['replicas_differing'])} replica(s) with another "
            f"epochs-to-best / epochs run / stop, test acc diff <= {g['largest_test_diff']:.4f}, val-loss diff <= "
            f"{g['largest_val_loss_diff']:.3g}; eager vs eager (noise floor): {len(n['replicas_differing'])} replica(s), "
            f"test <= {n['largest_test_diff']:.4f}, val loss <= {n['largest_val_loss_diff']:.3g}")


def _use_the_double() -> None:
    """The CPU smoke run: capture through the tests' double of a CUDA graph capture."""
    sys.path.insert(0, str(ROOT))
    import zoo.trainer.graphs as graphs
    from tests.trainer.capture_double import CheckedBackend

    graphs.capture_backend = lambda device: CheckedBackend()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {', '.join(CONFIGS)}")
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK}")
    p.add_argument("--double", action="store_true", help="CPU: capture through the tests' double")
    p.add_argument("--json", default=None, help="write every figure to this file")
    args = p.parse_args(argv)
    names = [n for n in args.configs.split(",") if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        p.error(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device (torch {torch.__version__})")
    if args.double:
        if args.device != "cpu":
            p.error("--double is the CPU smoke run's stand-in for a capture; use it with --device cpu")
        _use_the_double()
    os.environ.setdefault("ZOO_DATA_MIRROR", str(ROOT.parent / "shared" / "datasets"))
    result = run(names, args.device, args.quick)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
