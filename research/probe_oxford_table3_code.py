"""Probe: the Oxford report's Table 3 (Cora) under the authors' own code, run unmodified.

Question: where do Table 3's GATv2 (80.3), vanilla transformer (78.5) and universal transformer
(80.4) test accuracies come from, and does the authors' protocol give them at other seeds?

The authors' code (github samuelbarrett1234/atml-group-11 at commit b7c94fc, "Updated CORA
results", the commit that stored the Cora logs) is imported from a checkout given by ``--code``,
not copied: ``sam/experiments`` (``load_model``, ``transductive.train_model``) and
``kally/src/gat`` (the models).  Its protocol, read from that code and the stored configs
(``sam/best-configs-cora/*.json``): the grid-search run itself, ``max_epoch`` 100, the test
accuracy at the first epoch of highest validation accuracy; dense adjacency from PyG's Cora
(``NormalizeFeatures``), no self-loops added; GATv2 = ``kally`` ``GATv2`` (8 heads x 8, the score
a1^T LeakyReLU(W h_i) + a2^T LeakyReLU(W h_j), attention dropout only, no feature dropout, output
heads averaged), Adam 0.005, weight decay 3e-4; the transformers: a bias-free input projection,
Laplacian eigenvector positional embeddings (40, signs flipped at random every forward), Adam
5e-4 with StepLR(50, 0.8), hidden dropout 0.1 (vanilla) or annealed 0.1 -> 0.4 and attention
0 -> 0.1 over epochs 10-50 (universal).

Modes:
  stored  evaluate the code's saved best models (``*.pt``) on the zoo's Cora: checks the data;
  train   retrain each config at ``--seeds`` (``torch.manual_seed``) and print mean +- 95 % CI.

Usage (from the repository root, ZOO_DATA_MIRROR set; CODE = a checkout of the repository at b7c94fc):
  OMP_NUM_THREADS=1 python research/probe_oxford_table3_code.py --code CODE stored
  OMP_NUM_THREADS=1 python research/probe_oxford_table3_code.py --code CODE train --seeds 0 1 2 3 4
Options: ``--configs gatv2163 tr-small151 ut-small-dropout-annealing73``, ``--epochs N``
(overrides ``max_epoch``: the text's "a further 200 epochs").

Results: in the cells' notes (docs/reproduction/notes.toml, suite oxford_table3).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import List, Tuple

import torch
from torch_geometric.utils import to_dense_adj

from zoo.datasets import load

CONFIGS = ("gatv2163", "tr-small151", "ut-small-dropout-annealing73")
T_975 = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365, 9: 2.306, 10: 2.262}


def import_code(code: Path):
    """The authors' modules, imported from their checkout (their utils reads PATH_TO_GAT)."""
    os.environ["PATH_TO_GAT"] = str(code / "kally" / "src")
    sys.path[:0] = [str(code / "sam"), str(code / "kally" / "src")]
    import experiments  # noqa: F401  (their package: sam/experiments)
    return sys.modules["experiments.utils"], sys.modules["experiments.transductive"]


def cora() -> Tuple[torch.Tensor, ...]:
    """The tensors the code's ``transductive.load_dataset('cora')`` returns, from the zoo's loader."""
    task = load("cora", split="public", transforms=["normalize_features"])
    d = task.data
    adj = to_dense_adj(d.edge_index, max_num_nodes=d.num_nodes).squeeze(0)
    return d.x, d.y, adj, d.train_mask, d.val_mask, d.test_mask


def train_once(utils, transductive, cfg: dict, data, seed: int, epochs: int | None) -> Tuple[float, float, int]:
    """One run as the code's ``Experiment.run``: (best val, test at its first epoch, that epoch)."""
    torch.manual_seed(seed)
    cfg = json.loads(json.dumps(cfg))  # load_model edits the dict in place
    if epochs is not None:
        cfg["train_cfg"]["max_epoch"] = epochs
    model, train_cfgs = utils.load_model(cfg, 1433, 7)
    best = (0.0, 0.0, -1)
    for epoch, _loss, val, test, _pa, _ph in transductive.train_model(*data, model=model, train_cfgs=train_cfgs):
        if val > best[0]:  # the code's `is_improvement`: strictly better
            best = (val, test, epoch)
    return best


def stored(code: Path, names: List[str], data) -> None:
    """Test accuracy of the code's saved best models (torch.save of the module) on the zoo's Cora."""
    utils, _ = import_code(code)
    x, y, adj, _tr, val, test = data
    for name in names:
        model = torch.load(code / "sam" / "best-configs-cora" / f"{name}.pt", weights_only=False,
                           map_location="cpu")
        model.eval()
        with torch.no_grad():
            args = (x, adj)
            if hasattr(model, "pos_emb_dim"):
                args += (utils.flip_pos_embs(utils.laplacian_pos_emb(adj, model.pos_emb_dim)),)
            pred = model(*args).argmax(1)
        acc = lambda m: float((pred[m] == y[m]).float().mean())  # noqa: E731
        print(f"{name}: stored model on the zoo's Cora: val {acc(val):.3f} test {acc(test):.3f}", flush=True)


def train(code: Path, names: List[str], data, seeds: List[int], epochs: int | None) -> None:
    utils, transductive = import_code(code)
    for name in names:
        cfg = json.loads((code / "sam" / "best-configs-cora" / f"{name}.json").read_text())
        tests = []
        for seed in seeds:
            start = time.perf_counter()
            val, test, epoch = train_once(utils, transductive, cfg, data, seed, epochs)
            tests.append(100 * test)
            print(f"{name} seed {seed}: best val {100 * val:.1f} at epoch {epoch}, test {100 * test:.1f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        n = len(tests)
        ci = T_975.get(n, 1.96) * statistics.stdev(tests) / n ** 0.5 if n > 1 else float("nan")
        print(f"{name}: test {statistics.mean(tests):.2f} +- {ci:.2f} (95 % CI, {n} seeds; "
              f"epochs {epochs or cfg['train_cfg']['max_epoch']})", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--code", type=Path, required=True, help="a checkout of atml-group-11 at b7c94fc")
    p.add_argument("mode", choices=["stored", "train"])
    p.add_argument("--configs", nargs="+", default=list(CONFIGS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--epochs", type=int, default=None, help="override the configs' max_epoch (100)")
    args = p.parse_args()
    torch.set_num_threads(1)
    data = cora()
    if args.mode == "stored":
        stored(args.code, args.configs, data)
    else:
        train(args.code, args.configs, data, args.seeds, args.epochs)


if __name__ == "__main__":
    main()
