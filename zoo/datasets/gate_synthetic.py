"""GATE's synthetic test bed (Mustafa & Burkholz, ICML 2024), generated from a seed: dataset
``gate_synthetic``, option ``setting`` = a row of the authors' ``SyntheticDataSettings.csv``
(``RelationalML/GATE``; generator ``generateSyntheticData.py``).

* **Neighbour-dependent** (settings 21, 22, 23: 1, 2, 3 aggregation steps): an Erdős–Rényi graph
  (1000 nodes, edge probability 0.01, undirected), features ``x ~ N(0, I_2)``, labels from
  k-means (2 clusters, k-means++, 4 restarts) on the output of a random attention network with
  ``aggregation_steps`` layers of width 2 (``h'_v = sum_{u in N(v)} alpha_uv W h_u``, ``alpha``
  a softmax of ``a^T ReLU(W h_u + W h_v)`` over the neighbours, no self-loops, ReLU between
  layers; PyG's default ``Linear`` and Glorot draws).  A node's label needs its neighbourhood.
* **Self-sufficient** (24-27): features are the one-hot label, so a node's own features decide
  it and every neighbour is noise.  24: Cora's graph and labels; 25: Cora's graph, random labels
  (7 classes); 26 / 27: an Erdős–Rényi graph (1000 nodes, p = 0.01) with 2 / 8 random classes.

Splits: a random 50 / 25 / 25 % split of the nodes (``int`` counts, the rest to test), except
24 / 25, which keep Cora's public split as the code does (the CSV's fractions are not used
there; docs/differences.md).  Everything random is drawn from ``seed``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, Union

import torch
from torch import Tensor
from torch_geometric.data import Data

from .registry import load, register_dataset
from .task import Task

#: SyntheticDataSettings.csv: graph, classes, aggregation steps (None: self-sufficient), labels.
SETTINGS: Dict[int, Dict[str, Any]] = {
    21: dict(graph="er", num_classes=2, aggregation_steps=1),
    22: dict(graph="er", num_classes=2, aggregation_steps=2),
    23: dict(graph="er", num_classes=2, aggregation_steps=3),
    24: dict(graph="cora", num_classes=7, aggregation_steps=None, random_labels=False),
    25: dict(graph="cora", num_classes=7, aggregation_steps=None, random_labels=True),
    26: dict(graph="er", num_classes=2, aggregation_steps=None, random_labels=True),
    27: dict(graph="er", num_classes=8, aggregation_steps=None, random_labels=True),
}


def erdos_renyi(num_nodes: int, p: float, g: torch.Generator) -> Tensor:
    """Every unordered pair an edge with probability ``p``, both directions (PyG's
    ``erdos_renyi_graph(directed=False)``)."""
    pairs = torch.triu_indices(num_nodes, num_nodes, offset=1)
    keep = torch.rand(pairs.size(1), generator=g) < p
    e = pairs[:, keep]
    return torch.cat([e, e.flip(0)], 1)


def _attention_layer(x: Tensor, edge_index: Tensor, g: torch.Generator) -> Tensor:
    """One layer of the label generator (shared W, no self-loops, ReLU in the score)."""
    d = x.size(1)
    w = (torch.rand(d, d, generator=g) * 2 - 1) / math.sqrt(d)  # PyG Linear: kaiming_uniform(a=sqrt 5)
    bound = math.sqrt(6.0 / (1 + d))  # PyG glorot on the (1, 1, d) attention vector
    a = (torch.rand(d, generator=g) * 2 - 1) * bound
    src, dst = edge_index
    h = x @ w.T
    score = torch.relu(h[src] + h[dst]) @ a
    exp = (score - score.max()).exp()
    denom = torch.zeros(x.size(0)).index_add(0, dst, exp)
    alpha = exp / denom[dst]
    return torch.zeros_like(h).index_add(0, dst, alpha.unsqueeze(-1) * h[src])


def _neighbour_labels(x: Tensor, edge_index: Tensor, steps: int, seed: int, g: torch.Generator) -> Tensor:
    from sklearn.cluster import KMeans

    h = x
    for layer in range(steps):
        h = _attention_layer(h, edge_index, g)
        if layer < steps - 1:
            h = torch.relu(h)
    km = KMeans(n_clusters=2, init="k-means++", n_init=4, random_state=seed).fit(h.double().numpy())
    return torch.as_tensor(km.labels_, dtype=torch.long)


def _random_split(n: int, g: torch.Generator, train: float = 0.5, val: float = 0.25) -> Dict[str, Tensor]:
    order = torch.randperm(n, generator=g)
    cut = [int(train * n), int(train * n) + int(val * n)]
    masks = {}
    for name, idx in zip(("train_mask", "val_mask", "test_mask"), (order[:cut[0]], order[cut[0]:cut[1]], order[cut[1]:])):
        masks[name] = torch.zeros(n, dtype=torch.bool)
        masks[name][idx] = True
    return masks


@register_dataset("gate_synthetic", kind="transductive", metric="accuracy",
                  source="zoo.datasets.gate_synthetic (GATE's SyntheticDataSettings.csv)",
                  options={"setting": 21, "num_nodes": 1000, "edge_prob": 0.01}, synthetic=True)
def load_gate_synthetic(root: Path, split: Union[int, str, None], seed: int, setting: int = 21,
                        num_nodes: int = 1000, edge_prob: float = 0.01) -> Task:
    """GATE's synthetic task ``setting`` (21-27, module docstring); ``num_nodes`` / ``edge_prob``
    size the Erdős–Rényi graphs (Cora settings ignore them)."""
    if setting not in SETTINGS:
        raise ValueError(f"gate_synthetic: setting must be one of {sorted(SETTINGS)} (rows of the authors' "
                         f"SyntheticDataSettings.csv), got {setting!r}")
    if split not in (None, "random", "public"):
        raise ValueError(f"gate_synthetic has the authors' split only; got split={split!r}")
    if num_nodes < 2 or not 0 < edge_prob <= 1:
        raise ValueError(f"gate_synthetic: need num_nodes >= 2 and 0 < edge_prob <= 1, got {num_nodes}, {edge_prob}")
    s = SETTINGS[setting]
    g = torch.Generator().manual_seed(int(seed) * 7919 + setting)
    if s["graph"] == "cora":
        cora = load("cora", root=root).data
        edge_index, n = cora.edge_index, cora.num_nodes
        y = torch.randint(0, s["num_classes"], (n,), generator=g) if s["random_labels"] else cora.y
        masks = {k: getattr(cora, k) for k in ("train_mask", "val_mask", "test_mask")}
    else:
        n = num_nodes
        edge_index = erdos_renyi(n, edge_prob, g)
        masks = {}
    if s["aggregation_steps"] is None:
        if s["graph"] == "er":
            y = torch.randint(0, s["num_classes"], (n,), generator=g)
        x = torch.nn.functional.one_hot(y, s["num_classes"]).float()
        kind = "self-sufficient"
    else:
        x = torch.randn(n, 2, generator=g)
        y = _neighbour_labels(x, edge_index, s["aggregation_steps"], seed, g)
        kind = f"neighbour-dependent, {s['aggregation_steps']} aggregation step(s)"
    masks = masks or _random_split(n, g)
    data = Data(x=x, edge_index=edge_index, y=y, **masks)
    label = "public" if s["graph"] == "cora" else f"random:seed={seed}"
    return Task(name="gate_synthetic", kind="transductive", metric="accuracy", num_features=int(x.size(1)),
                num_classes=int(s["num_classes"]), multilabel=False, data=data, split=label,
                preprocessing=(f"gate_synthetic(setting={setting}: {kind}, seed={seed})",),
                source="zoo.datasets.gate_synthetic.load_gate_synthetic")
