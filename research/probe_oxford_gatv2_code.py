"""Probe: the Oxford report's Table 4 GATv2 rows under its benchmark code's attention head.

Question: the report's GATv2 (a) and (d) give 84.0 on Cora (one run each; the suite, with eq. 7:
82.86 +- 0.11 and 82.54 +- 0.56).  Does the code's head explain it?

The report's benchmark code (github samuelbarrett1234/atml-group-11, damon/src/oxgat/components.py
``GATv2AttentionHead``, run by damon/notebooks/experiments.ipynb; read, not copied) scores an edge
j -> i as ``a1^T LeakyReLU(W1 h_i) + a2^T LeakyReLU(W2 h_j)``: the LeakyReLU acts on each node's
projection, not on their sum (eq. 7), so the query term is constant over the softmax and the
attention depends on the neighbour alone.  ``W1``/``W2``/``W3`` are ``nn.Linear`` with a bias, Xavier-
uniform at gain ``calculate_gain('leaky_relu', 0.2)`` (the biases keep PyTorch's default draw); the
message is ``W h_j`` (``W = W2``, (a): ``W1 = W2``) or a third matrix ``W3`` ((d)).  The model
(``CustomNodeClassifier``): dropout 0.6 before each layer and on the attention, 8 heads x 8 then 1,
heads concatenated then averaged, ELU, Adam 0.005, weight decay 5e-4, early stopping when neither
validation loss nor accuracy improved for 100 epochs, test at the lowest validation loss.

Forms (``--form``): ``code`` (as above) or ``eq7`` (``a^T LeakyReLU(W1 h_i + W2 h_j)``, same
everything else).  ``--variant a`` (shared W, message W) or ``d`` (unshared, separate W3).

Usage: OMP_NUM_THREADS=1 python research/probe_oxford_gatv2_code.py --form code --variant a --seeds 5
Results: in the cells' note (docs/reproduction/notes.toml, oxford_table4 GATv2).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.utils import add_self_loops, remove_self_loops, softmax

from zoo.datasets import load

from oxford_protocol import train_code_protocol

GAIN = nn.init.calculate_gain("leaky_relu", 0.2)


class Head(nn.Module):
    """One attention head of the code's GATv2 (``form = "code"``) or of eq. 7 (``"eq7"``)."""

    def __init__(self, fin: int, fout: int, form: str, variant: str) -> None:
        super().__init__()
        self.form = form
        self.w1 = nn.Linear(fin, fout)
        self.w2 = self.w1 if variant == "a" else nn.Linear(fin, fout)
        self.w3 = nn.Linear(fin, fout) if variant == "d" else None
        self.a1, self.a2 = nn.Linear(fout, 1, bias=False), nn.Linear(fout, 1, bias=False)
        for lin in {self.w1, self.w2, self.w3} - {None}:
            nn.init.xavier_uniform_(lin.weight, gain=GAIN)
        for a in (self.a1, self.a2):
            nn.init.xavier_uniform_(a.weight)

    def forward(self, x: Tensor, ei: Tensor, p: float) -> Tensor:
        dst, src = ei  # row i aggregates over its neighbours j (the code's softmax over dim 1)
        h1, h2 = self.w1(x), self.w2(x)
        if self.form == "code":
            e = self.a1(F.leaky_relu(h1, 0.2))[dst] + self.a2(F.leaky_relu(h2, 0.2))[src]
        else:  # eq. 7: one attention vector on the LeakyReLU of the sum
            e = self.a1(F.leaky_relu(h1[dst] + h2[src], 0.2))
        alpha = F.dropout(softmax(e.squeeze(-1), dst, num_nodes=x.size(0)), p, self.training)
        msg = (self.w3 if self.w3 is not None else self.w2)(x)[src]
        return torch.zeros_like(h1).index_add_(0, dst, alpha.unsqueeze(-1) * msg)


class Model(nn.Module):
    def __init__(self, fin: int, classes: int, form: str, variant: str) -> None:
        super().__init__()
        self.l1 = nn.ModuleList(Head(fin, 8, form, variant) for _ in range(8))
        self.l2 = nn.ModuleList([Head(64, classes, form, variant)])

    def forward(self, x: Tensor, ei: Tensor, p: float = 0.6) -> Tensor:
        x = F.dropout(x, p, self.training)
        x = F.elu(torch.cat([h(x, ei, p) for h in self.l1], dim=1))
        x = F.dropout(x, p, self.training)
        return torch.stack([h(x, ei, p) for h in self.l2]).mean(0)


def run(d, ei: Tensor, form: str, variant: str, seed: int) -> float:
    torch.manual_seed(seed)
    model = Model(d.x.size(1), int(d.y.max()) + 1, form, variant)
    return train_code_protocol(model, lambda: model(d.x, ei), d)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--form", choices=["code", "eq7"], default="code")
    p.add_argument("--variant", choices=["a", "d"], default="a")
    p.add_argument("--dataset", default="cora")
    p.add_argument("--seeds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    d = load(args.dataset, split="public", transforms=["normalize_features"]).data
    ei = add_self_loops(remove_self_loops(d.edge_index)[0], num_nodes=d.num_nodes)[0]
    tests = []
    for seed in range(args.seeds):
        start = time.perf_counter()
        tests.append(run(d, ei, args.form, args.variant, seed))
        print(f"seed {seed}: test {tests[-1]:.1f} ({time.perf_counter() - start:.0f} s)", flush=True)
    ci = 2.776 * statistics.stdev(tests) / len(tests) ** 0.5 if len(tests) == 5 else float("nan")
    print(f"{args.dataset} form={args.form} variant={args.variant}: {statistics.mean(tests):.2f} +- {ci:.2f} "
          f"(95 % CI, {len(tests)} seeds)", flush=True)


if __name__ == "__main__":
    main()
