"""Trainability of a deep GAT under Xavier vs balanced inits (balance paper Fig. 4, Table 3).

Cora (public split, row-normalised features as in the paper's code), GATv2 with shared weights,
10 layers, width 64, one head, ReLU, no bias, full-batch SGD lr 0.05, up to 2000 epochs (stop
early once the training loss is <= 1e-4), seed 0.  For each init prints the final training loss,
the test accuracy at the best validation epoch, the epoch of that best model, and per layer the
fraction of significant feature weights (``|w*| >= 1e-4``) whose relative change exceeds 0.05 and
of attention weights that changed at all (w* = the best-validation model).

Expected shape (paper): Xavier stays near chance; Bal_O reaches ~80 % with train loss -> 0.
This is a benchmark (minutes on 2 CPU cores), not a test.

    python research/trainability.py [--inits xav bal_x bal_o] [--epochs 2000] [--plots DIR]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Dict, List

import torch
import torch.nn.functional as F

import zoo
from zoo.diagnostics import FIGURE_THRESHOLDS, ConservationRecorder, parameter_change, snapshot

REPO = Path(__file__).resolve().parents[1]


def load_cora():
    default_mirror = REPO.parent / "shared" / "datasets"
    if not os.environ.get("ZOO_DATA_MIRROR") and default_mirror.exists():
        os.environ["ZOO_DATA_MIRROR"] = str(default_mirror)  # read-only source; the loader copies from it
    return zoo.datasets.load("cora", transforms=["normalize_features"]).data


def run(init: str, data, args) -> Dict:
    torch.manual_seed(args.seed)
    model = zoo.build(args.model, in_dim=data.num_features, out_dim=int(data.y.max()) + 1,
                      hidden_dim=args.width, num_layers=args.layers, heads=1, activation="relu", bias=False,
                      init=init)
    start = snapshot(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    recorder = ConservationRecorder(model, every=args.record_every, conservation=False)
    best = {"val": -1.0, "test": 0.0, "epoch": 0, "state": None}
    loss_value = float("nan")
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        opt.zero_grad()
        out = model(data.edge_index, data.x)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        loss_value = loss.item()
        recorder(epoch, loss=loss_value)
        # Evaluate the parameters that produced this loss (before the step), so "best" is consistent.
        with torch.no_grad():
            pred = out.argmax(-1)
            val = float((pred[data.val_mask] == data.y[data.val_mask]).float().mean())
            if val > best["val"]:
                test = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
                best = {"val": val, "test": test, "epoch": epoch, "state": snapshot(model)}
        if epoch % 250 == 0:
            print(f"  {init} epoch {epoch}: train loss {loss_value:.4g}, val {100 * val:.1f}%", flush=True)
        if loss_value <= 1e-4:
            break
        opt.step()
    seconds = time.perf_counter() - t0
    # The figures' thresholds: Fig. 3a (L = 5) relative change > 0.05, Fig. 4a (L = 10) > 0.5.
    threshold = FIGURE_THRESHOLDS["fig4a" if args.layers >= 10 else "fig3a"]
    change = parameter_change(start, best["state"], threshold=threshold, min_magnitude=1e-4)
    return {"init": init, "loss": loss_value, "epochs": epoch + 1, "best_epoch": best["epoch"],
            "val": best["val"], "test": best["test"], "change": change, "seconds": seconds, "recorder": recorder}


def report(results: List[Dict]) -> None:
    print(f"\n{'init':8s} {'final train loss':>16s} {'test acc@best val':>17s} {'val acc':>8s} "
          f"{'epochs to best':>14s} {'epochs run':>10s} {'s':>6s}")
    for r in results:
        print(f"{r['init']:8s} {r['loss']:16.4g} {100 * r['test']:16.1f}% {100 * r['val']:7.1f}% "
              f"{r['best_epoch']:14d} {r['epochs']:10d} {r['seconds']:6.0f}")
    for kind, label in (("features", "feature weights with relative change > 0.05"),
                        ("attention", "attention weights that changed")):
        print(f"\nfraction of {label}, per layer:")
        print(f"{'init':8s} " + " ".join(f"{'l' + str(i + 1):>5s}" for i in range(len(results[0]['change']))))
        for r in results:
            print(f"{r['init']:8s} " + " ".join(f"{row[kind]:5.2f}" for row in r["change"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--inits", nargs="+", default=["xav", "bal_x", "bal_o"])
    p.add_argument("--model", default="gatv2")
    p.add_argument("--layers", type=int, default=10)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--epochs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--record-every", type=int, default=25)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: on a busy 2-core machine, OpenMP spin-waiting made 2 threads ~30x slower)")
    p.add_argument("--plots", type=Path, default=None, help="write relative-gradient and change-fraction plots here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    data = load_cora()
    results = []
    for init in args.inits:
        r = run(init, data, args)
        print(f"{init}: done in {r['seconds']:.0f}s ({r['epochs']} epochs), test {100 * r['test']:.1f}%", flush=True)
        results.append(r)
    report(results)
    if args.plots:
        import matplotlib

        matplotlib.use("Agg")
        from zoo.diagnostics import plot_change_fractions, plot_relative_grad_norms

        args.plots.mkdir(parents=True, exist_ok=True)
        for r in results:
            plot_relative_grad_norms(r["recorder"], title=f"{r['init']}: test {100 * r['test']:.1f}%").savefig(
                args.plots / f"relgrad_{r['init']}.png", dpi=120)
        plot_change_fractions({r["init"]: r["change"] for r in results}).savefig(args.plots / "change.png", dpi=120)
        print(f"plots written to {args.plots}")


if __name__ == "__main__":
    main()
