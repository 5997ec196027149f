"""Probe: the twin task (Oxford report §4.5) under the text's and the authors' code's settings.

Authors' code (github samuelbarrett1234/atml-group-11, kally/src/theoretical/construct_dataset.py
``kn_artificial`` and kally/src/test/demo_artificial_ours.ipynb), read, not copied:
  * every permutation of 0..k-1 once (k! graphs), all used for training, batch size 1;
  * second-group features ``[one_hot(i) | one_hot(perm[i])]`` (the text: ``[0 | one_hot(perm[i])]``);
  * complete graph with self-loops; one layer of width k, one head, no activation; CE on all nodes;
  * training accuracy = max over epochs of the accuracy over all nodes of all graphs;
  * their "GATv2" layer scores ``a1^T LeakyReLU(W h_i) + a2^T LeakyReLU(W h_j)`` (the LeakyReLU
    on each node's projection, not on the sum): the query term cancels in the softmax.

Usage: research/probe_twin_authors_code.py --k 3 4 5 --features code --graphs all --models gat gatv2 gatv2_code gatdb
"""
from __future__ import annotations

import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch import nn

import zoo
import zoo.datasets as zd
from zoo.datasets.synthetic import complete_edge_index


def twin_graphs(k: int, features: str, graphs: str, seed: int):
    """The training graphs as (x, y) pairs, from the zoo's twin loader (the suites' data)."""
    every = graphs == "all"
    task = zd.load("twin", k=k, seed=seed, features=features, all_permutations=every,
                   num_train=1 if every else int(graphs), num_val=1, num_test=1)
    return [(g.x, g.y) for g in task.graphs["train"]]


class SeparableGATv2(nn.Module):
    """The authors' code's 'GATv2' score: a1^T LReLU(W h_i) + a2^T LReLU(W h_j), dense, one head."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.empty(in_dim, out_dim))
        self.a = nn.Parameter(torch.empty(2 * out_dim))
        nn.init.xavier_uniform_(self.W)
        bound = math.sqrt(6.0 / (1 + out_dim))
        nn.init.uniform_(self.a, -bound, bound)
        self.c = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # complete graph with self-loops
        h = x @ self.W
        act = F.leaky_relu(h, 0.2)
        query, key = act @ self.a[: self.c], act @ self.a[self.c:]
        scores = query[:, None] + key[None, :]
        return torch.softmax(scores, dim=1) @ h


def make(model: str, k: int):
    if model == "gatv2_code":
        return SeparableGATv2(2 * k, k), None
    base = "gatdb" if model == "gatdb_xavier" else model
    m = zoo.build(base, in_dim=2 * k, out_dim=k, num_layers=1, heads=1)
    ei = complete_edge_index(2 * k)
    if model == "gatdb_xavier":  # the code's bias init: xavier_uniform, gain sqrt(2 / (1 + 0.2^2)), on (2k, 2k)
        with torch.no_grad():
            m(ei, torch.zeros(2 * k, 2 * k))  # materialises xi (one per edge incl. self-loops)
            bound = math.sqrt(2 / 1.04) * math.sqrt(6 / (4 * k))
            m.layers[0].xi.uniform_(-bound, bound)
    return m, ei


def run(model: str, k: int, features: str, graphs: str, seed: int, epochs: int, lr: float) -> float:
    torch.manual_seed(seed)
    data = twin_graphs(k, features, graphs, seed)
    net, ei = make(model, k)
    fwd = (lambda x: net(x)) if ei is None else (lambda x: net(ei, x))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    best = 0.0
    for _ in range(epochs):
        net.train()
        for x, y in data:
            loss = F.cross_entropy(fwd(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        net.eval()
        with torch.no_grad():
            correct = sum(int((fwd(x).argmax(1) == y).sum()) for x, y in data)
        best = max(best, correct / (2 * k * len(data)))
        if best == 1.0:
            break
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--k", type=int, nargs="+", default=[3, 4, 5])
    p.add_argument("--features", choices=["text", "code"], default="code")
    p.add_argument("--graphs", default="all", help="'all' (k! permutations) or a number of random ones")
    p.add_argument("--models", nargs="+", default=["gat", "gatv2", "gatv2_code", "gatdb"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--lr", type=float, default=0.005)
    a = p.parse_args()
    torch.set_num_threads(1)
    for k in a.k:
        for model in a.models:
            t = time.time()
            accs = [run(model, k, a.features, a.graphs, s, a.epochs, a.lr) for s in a.seeds]
            mean = sum(accs) / len(accs)
            print(f"features={a.features} graphs={a.graphs} k={k} {model:11s} train acc % "
                  f"{100 * mean:6.2f}  per seed {[round(100 * v, 2) for v in accs]}  ({time.time() - t:.0f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
