"""Probe: why the nonlocal paper's L = 2 SAN accuracies on Cora (Pre-LN 88.40, Post-LN 87.66) sat above ours.

One run = one training trace of a 2-layer SAN on one random 60/20/20 split, evaluated (eval mode) after every
epoch, so that several model-selection rules and epoch budgets are read off the same trace:

* ``first``: the first epoch with the highest validation accuracy (the zoo's rule, ``select = "val_metric"``);
* ``last``: the last epoch with the highest validation accuracy (ties to the later state);
* ``loss``: the epoch with the lowest validation loss;
* ``final``: the last epoch.

``--budgets 300 1000 5000`` reads each rule off the first 300 / 1000 / 5000 epochs of one trace (what a run of
that many epochs would have selected: the states up to epoch ``b`` do not depend on later ones).

Trainers (``--trainer``): ``plain`` is a plain PyTorch loop (``torch.optim.Adam``/``AdamW``, global-RNG dropout
unless ``--same-masks``); ``zoo`` is the benchmark's own trainer (``zoo.trainer.loop``: the stacked Adam,
replica dropout streams, the selection the suites use); ``both`` runs the two and prints how far their traces
differ — with ``--same-masks`` (the plain loop draws its dropout masks from the zoo's stream for the seed) and
``--dtype float64`` the two must agree to rounding, which tests the trainer itself.

Knobs (each a setting the paper does not state, Appendix B.1 / §3.1): the optimizer (``adam``: L2 added to the
gradient, as ``torch.optim.Adam(weight_decay=...)``; ``adamw``: decoupled), the weight decay, the encoder's input
dropout, the split seed (``--split-seed``; default: the run seed) and the split sizes' rounding (``--rounding
floor``: the paper's 1624 / 541 / 543 on Cora).  ``--gcn`` instead trains a 2-layer GCN (Kipf & Welling: hidden
64, dropout 0.5, Adam 0.01, weight decay 5e-4, 500 epochs) on the same splits: a yardstick of how hard each
split's test part is.

    OMP_NUM_THREADS=1 python research/probe_nonlocal_l2.py --model san_pre_ln --epochs 1500 --seeds 0
    OMP_NUM_THREADS=1 python research/probe_nonlocal_l2.py --trainer both --same-masks --dtype float64 --epochs 100
    OMP_NUM_THREADS=1 python research/probe_nonlocal_l2.py --trainer zoo --epochs 5000 --budgets 300 1000 5000
    OMP_NUM_THREADS=1 python research/probe_nonlocal_l2.py --gcn --seeds 0 1 2 3 4 5 6 7 8 9

Prints one line per run and budget: the train / val / test accuracy (%) under each selection rule and the epoch
it picks.  ``--save DIR`` writes each trace as JSON (``[train, val, test, val loss]`` per epoch).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

import zoo
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.datasets import load
from zoo.ops.dropout import ReplicaRandomness, replica_randomness

Trace = List[Tuple[float, float, float, float]]  # per state: train / val / test accuracy (%), val loss


class SparseInputLinear(torch.nn.Module):
    """``nn.Linear`` of a mostly-zero input (Cora's bag of words: 1.3 % non-zero) through a sparse
    product: the same map and gradients, ~50x less work than the dense product on a 2-core CPU."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.sparse.mm(x.to_sparse(), self.weight.t())
        return out if self.bias is None else out + self.bias


class GCN(torch.nn.Module):
    """Kipf & Welling's 2-layer GCN (symmetric normalisation with self-loops, dropout on both inputs)."""

    def __init__(self, task, hidden: int = 64, p: float = 0.5) -> None:
        super().__init__()
        n, ei = task.data.num_nodes, task.data.edge_index
        loops = torch.arange(n)
        ei = torch.cat([ei, torch.stack([loops, loops])], 1)
        deg = torch.zeros(n).index_add_(0, ei[0], torch.ones(ei.size(1)))
        w = deg[ei[0]].rsqrt() * deg[ei[1]].rsqrt()
        self.adj = torch.sparse_coo_tensor(ei.flip(0), w, (n, n)).coalesce()
        self.lin1 = SparseInputLinear(torch.nn.Linear(task.num_features, hidden))
        self.lin2 = torch.nn.Linear(hidden, task.num_classes)
        self.p = p

    def forward(self, edge_index, x):
        x = F.dropout(x, self.p, self.training)
        h = F.relu(torch.sparse.mm(self.adj, self.lin1(x)))
        h = F.dropout(h, self.p, self.training)
        return torch.sparse.mm(self.adj, self.lin2(h))


def plain_trace(model: torch.nn.Module, task, opt: torch.optim.Optimizer, epochs: int, warmup: int, lr: float,
                masks: Optional[ReplicaRandomness] = None, dtype: torch.dtype = torch.float32) -> Trace:
    """A plain loop's trace for states 0..epochs (eval mode); ``masks``: draw dropout from that stream."""
    d = task.data
    x = d.x.to(dtype)
    split_masks = [d.train_mask, d.val_mask, d.test_mask]
    token = torch.tensor(0)
    stream = (lambda: replica_randomness(masks, token)) if masks is not None else contextlib.nullcontext
    out: Trace = []
    for epoch in range(epochs + 1):
        model.eval()
        with torch.no_grad():
            logits = model(d.edge_index, x)
            pred = logits.argmax(-1)
            accs = [float((pred[m] == d.y[m]).double().mean()) * 100 for m in split_masks]
            out.append((*accs, float(F.cross_entropy(logits[d.val_mask], d.y[d.val_mask]))))
        if epoch == epochs:
            break
        if warmup:
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (epoch + 1) / warmup)
        model.train()
        opt.zero_grad()
        with stream():
            train_logits = model(d.edge_index, x)
        loss = F.cross_entropy(train_logits[d.train_mask], d.y[d.train_mask])
        loss.backward()
        opt.step()
    return out


class _Recorder:
    """Callback of the zoo trainer: the evaluated metrics of every state (one replica)."""

    def __init__(self) -> None:
        self.trace: Trace = []

    def on_epoch_end(self, state) -> None:
        m = state.metrics
        self.trace.append((float(m["train"][0]) * 100, float(m["val"][0]) * 100, float(m["test"][0]) * 100,
                           float(m["val_loss"][0])))


def zoo_trace(factory: Callable[[], torch.nn.Module], task, seed: int, optimizer: str, lr: float, wd: float,
              warmup: int, epochs: int, dtype: torch.dtype) -> Trace:
    """The benchmark trainer's trace (``zoo.trainer.loop``, one replica, the suites' defaults)."""
    cfg = TrainConfig(optimizer=optimizer, lr=lr, weight_decay=wd, warmup_epochs=warmup, epochs=epochs)
    replicas, view = build_replicas(task, [factory], [seed], torch.device("cpu"), dtype, cfg, stacked=True)
    recorder = _Recorder()
    train_replicas(task, replicas, view, cfg, [seed], callbacks=[recorder])
    return recorder.trace


def select(trace: Trace) -> Dict[str, int]:
    """The epoch each selection rule picks."""
    vals = [t[1] for t in trace]
    best = max(vals)
    return {"first": vals.index(best), "last": len(vals) - 1 - vals[::-1].index(best),
            "loss": min(range(len(trace)), key=lambda e: trace[e][3]), "final": len(trace) - 1}


def describe(trace: Trace, budgets: Sequence[int]) -> List[str]:
    lines = []
    for b in budgets:
        prefix = trace[:b + 1]
        parts = [f"{rule} e{e} {prefix[e][0]:.1f}/{prefix[e][1]:.2f}/{prefix[e][2]:.2f}"
                 for rule, e in select(prefix).items()]
        lines.append(f"  budget {len(prefix) - 1}: " + "; ".join(parts))
    return lines


def trace_difference(a: Trace, b: Trace) -> str:
    """How far two traces of the same run differ: max |delta| per column, states whose accuracies differ."""
    n = min(len(a), len(b))
    cols = ["train", "val", "test", "val_loss"]
    worst = {c: max(abs(a[e][i] - b[e][i]) for e in range(n)) for i, c in enumerate(cols)}
    differ = [e for e in range(n) if any(a[e][i] != b[e][i] for i in range(3))]
    first = differ[0] if differ else None
    return (f"states {n} (lengths {len(a)}/{len(b)}); max |delta| " + ", ".join(f"{c} {v:.3g}" for c, v in worst.items())
            + f"; accuracies differ at {len(differ)} states (first: {first})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="san_pre_ln", choices=["san_pre_ln", "san_post_ln", "san_nonlocal"])
    ap.add_argument("--gcn", action="store_true", help="the GCN yardstick instead of a SAN")
    ap.add_argument("--trainer", default="plain", choices=["plain", "zoo", "both"])
    ap.add_argument("--same-masks", action="store_true", help="plain loop: dropout masks from the zoo's stream")
    ap.add_argument("--dense", action="store_true", help="keep the dense nn.Linear encoder (slower, the suite's)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--epochs", type=int, default=1500)
    ap.add_argument("--budgets", type=int, nargs="*", default=None, help="epoch budgets read off the trace")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adamw"])
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--input-dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=None, help="default: Pre-LN 1e-3, Post-LN 1e-4 (B.1)")
    ap.add_argument("--warmup", type=int, default=None, help="linear warm-up epochs (default: Post-LN 500 * epochs / 5000)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--split-seed", type=int, default=None, help="default: each run's seed")
    ap.add_argument("--rounding", default="round", choices=["round", "floor"], help="split sizes (datasets: ratio_rounding)")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--save", default=None, help="folder for the traces (JSON)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype)
    for seed in args.seeds:
        split_seed = seed if args.split_seed is None else args.split_seed
        task = load("cora", root=args.data_root, split="ratio", seed=split_seed, train_ratio=0.6, val_ratio=0.2,
                    ratio_rounding=args.rounding)
        sizes = "/".join(str(v) for v in task.split_sizes().values())
        if args.gcn:
            torch.manual_seed(seed)
            model = GCN(task)
            opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
            t0 = time.perf_counter()
            traces = {"gcn": plain_trace(model, task, opt, 500, 0, 0.01)}
            name, epochs = "gcn", 500
        else:
            pre = args.model == "san_pre_ln"
            lr = args.lr if args.lr is not None else (1e-3 if pre else 1e-4)
            warmup = args.warmup if args.warmup is not None else (0 if pre else max(1, 500 * args.epochs // 5000))
            epochs, wd = args.epochs, args.weight_decay

            def factory() -> torch.nn.Module:
                model = zoo.build(args.model, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=32,
                                  num_layers=2, input_dropout=args.input_dropout)
                if not args.dense:
                    model.encoder[0] = SparseInputLinear(model.encoder[0])
                return model

            traces: Dict[str, Trace] = {}
            t0 = time.perf_counter()
            if args.trainer in ("plain", "both"):
                torch.manual_seed(seed)
                model = factory().to(dtype)
                cls = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
                opt = cls(model.parameters(), lr=lr, weight_decay=wd)
                masks = ReplicaRandomness([seed]) if args.same_masks else None
                traces["plain"] = plain_trace(model, task, opt, epochs, warmup, lr, masks, dtype)
            if args.trainer in ("zoo", "both"):
                traces["zoo"] = zoo_trace(factory, task, seed, args.optimizer, lr, wd, warmup, epochs, dtype)
            name = (f"{args.model} {args.optimizer} wd={wd:g} in_drop={args.input_dropout:g} lr={lr:g} "
                    f"warmup={warmup} {args.dtype}{' same-masks' if args.same_masks else ''}")
        wall = time.perf_counter() - t0
        budgets = args.budgets or [epochs]
        for trainer, trace in traces.items():
            print(f"{name} [{trainer}] seed={seed} split={split_seed} ({sizes}, {args.rounding}) epochs={epochs} "
                  f"({wall:.0f} s all trainers)", flush=True)
            print("\n".join(describe(trace, budgets)), flush=True)
            if args.save:
                folder = Path(args.save)
                folder.mkdir(parents=True, exist_ok=True)
                tag = "gcn" if args.gcn else f"{args.model}_{trainer}"
                path = folder / f"{tag}_seed{seed}_split{split_seed}_{args.rounding}_{epochs}ep_{args.dtype}.json"
                path.write_text(json.dumps(trace))
        if len(traces) == 2:
            print("  plain vs zoo: " + trace_difference(traces["plain"], traces["zoo"]), flush=True)


if __name__ == "__main__":
    main()
