"""Synthetic tasks generated deterministically from a seed: ``trees`` and ``twin``.

Both are inductive node classification on many small graphs (``Task.graphs``).

**trees** — Tree-NeighborsMatch (Alon & Yahav 2021) as the LipschitzNorm paper (§7.2) uses
it. A complete binary tree of depth ``d`` (2 <= d <= 10) has ``L = 2**d`` bottom nodes. The
bottom nodes and the root are *green*; bottom node ``j`` has ``j + 1`` *blue* neighbours and a
label ``perm[j]`` (``perm`` a random permutation of ``0..L-1``). The root has ``b`` blue
neighbours (``b`` uniform in ``1..L``) and its label is that of the green node with the same
number of blue neighbours, ``perm[b - 1]``. As in the paper, blue neighbours are not nodes:
their count is a one-hot feature of the green node. Features (width ``2L``):
``[one_hot(blue_count - 1, L) | one_hot(label, L)]`` for bottom nodes, ``[one_hot(b - 1, L) | 0]``
for the root, zeros elsewhere. Edges point from child to parent, so messages flow to the
root, which needs ``d`` hops; models add self-loops themselves. Only the root is labelled
(``label_mask``; other nodes carry ``y = -1`` so that forgetting the mask fails loudly).
``L`` classes. Graphs are built on access (``TreeGraphs``), so depth 10 (2047 nodes,
2048 features per node) does not need the whole set in memory.

**twin** — exploring-graph-attention-networks §4.5.1. A complete graph on ``2k`` nodes;
node ``i < k`` and its twin ``k + i`` share the label ``perm[i]`` and no other node has it.
Features (width ``2k``): node ``i < k`` is ``[one_hot(i, k) | 0]``, node ``k + i`` is
``[0 | one_hot(perm[i], k)]``; to classify a first-group node a layer must attend to its twin.
Edges: every ordered pair ``(i, j), i != j`` (``self_loops=True`` adds ``(i, i)``). ``k``
classes; every node is labelled. All graphs share one ``edge_index`` (only ``perm`` changes),
so a model with per-edge attention biases (GATDB) sees one structure.

With the text's features a second-group node does not show which first-group node it is the
twin of, so no feature-based attention (GAT, GATv2) can find the twin; only per-edge biases
(GATDB) can. Two options give the authors' code instead (github samuelbarrett1234/atml-group-11,
``kally/src/theoretical/construct_dataset.py``, ``kn_artificial``):
``features="code"``: node ``k + i`` is ``[one_hot(i, k) | one_hot(perm[i], k)]`` (it also shows
its index, so a dynamic attention can match it from the features); ``all_permutations=True``:
the training graphs are the ``k!`` permutations, each once, in a seeded order (the code's 100
epochs are then ``100 k!`` steps at batch size 1; ``num_train`` is not used). The code's graph
has self-loops; the zoo's models add them (``self_loops="add"``).
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Dict, List, Sequence, Union, overload

import torch
from torch import Tensor
from torch_geometric.data import Data

from .._names import unknown_name_error

from .registry import register_dataset
from .task import Task


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) * 7919 + salt)


def _split_counts(n: int, train_fraction: float, val_fraction: float) -> List[int]:
    if not (0 < train_fraction and 0 < val_fraction and train_fraction + val_fraction < 1):
        raise ValueError("need 0 < train_fraction, 0 < val_fraction and train_fraction + val_fraction < 1")
    n_train = int(round(train_fraction * n))
    n_val = int(round(val_fraction * n))
    if min(n_train, n_val, n - n_train - n_val) < 1:
        raise ValueError(f"{n} graphs are too few for a non-empty train/val/test split")
    return [n_train, n_val, n - n_train - n_val]


# ----------------------------------------------------------------------------- TREES

def tree_edge_index(depth: int) -> Tensor:
    """Child -> parent edges of a complete binary tree (heap order, root 0)."""
    child = torch.arange(1, 2 ** (depth + 1) - 1)
    return torch.stack([child, (child - 1) // 2])


class TreeGraphs(Sequence[Data]):
    """Trees built on access from ``(blue count of the root, leaf label permutation)`` rows."""

    def __init__(self, depth: int, root_blue: Tensor, perms: Tensor, edge_index: Tensor) -> None:
        self.depth, self.root_blue, self.perms, self.edge_index = depth, root_blue, perms, edge_index

    def __len__(self) -> int:
        return int(self.root_blue.numel())

    @overload
    def __getitem__(self, i: int) -> Data: ...
    @overload
    def __getitem__(self, i: slice) -> List[Data]: ...

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        num_leaves = 2 ** self.depth
        n = 2 * num_leaves - 1
        first_leaf = num_leaves - 1
        perm, b = self.perms[i].long(), int(self.root_blue[i])
        x = torch.zeros(n, 2 * num_leaves)
        leaves = torch.arange(first_leaf, n)
        x[leaves, torch.arange(num_leaves)] = 1.0              # leaf j has j + 1 blue neighbours
        x[leaves, num_leaves + perm] = 1.0                     # ... and label perm[j]
        x[0, b - 1] = 1.0                                      # the root has b blue neighbours
        y = torch.full((n,), -1, dtype=torch.long)
        y[0] = perm[b - 1]
        label_mask = torch.zeros(n, dtype=torch.bool)
        label_mask[0] = True
        return Data(x=x, edge_index=self.edge_index, y=y, label_mask=label_mask)

    def num_labelled(self) -> int:
        return len(self)


@register_dataset("trees", kind="inductive", metric="accuracy", source="zoo.datasets.synthetic (Tree-NeighborsMatch)",
                  options={"depth": 3, "num_trees": 5000, "train_fraction": 0.8, "val_fraction": 0.1},
                  synthetic=True, aliases=("tree_neighbors_match",),
                  stats={"graphs": 5000, "classes": "2**depth", "features": "2**(depth+1)"})
def load_trees(root: Path, split: Union[int, str, None], seed: int, depth: int = 3, num_trees: int = 5000,
               train_fraction: float = 0.8, val_fraction: float = 0.1) -> Task:
    if not (isinstance(depth, int) and 2 <= depth <= 10):
        raise ValueError(f"trees: depth must be an int in 2..10 (LipschitzNorm §7.2), got {depth!r}")
    if split not in (None, "random"):
        raise ValueError(f"trees has one seeded random split; got split={split!r}")
    num_leaves = 2 ** depth
    g = _generator(seed, depth)
    perms = torch.argsort(torch.rand(num_trees, num_leaves, generator=g), dim=1).to(torch.int16)
    root_blue = torch.randint(1, num_leaves + 1, (num_trees,), generator=g)
    order = torch.randperm(num_trees, generator=g)
    edge_index = tree_edge_index(depth)
    graphs: Dict[str, Sequence[Data]] = {}
    start = 0
    for name, count in zip(("train", "val", "test"), _split_counts(num_trees, train_fraction, val_fraction)):
        idx = order[start:start + count]
        graphs[name] = TreeGraphs(depth, root_blue[idx], perms[idx], edge_index)
        start += count
    return Task(name="trees", kind="inductive", metric="accuracy", num_features=2 * num_leaves,
                num_classes=num_leaves, multilabel=False, graphs=graphs, split=f"random:seed={seed}",
                preprocessing=(f"trees(depth={depth}, num_trees={num_trees}, seed={seed})",),
                source="zoo.datasets.synthetic.load_trees")


# ----------------------------------------------------------------------------- twin

def complete_edge_index(n: int, self_loops: bool = False) -> Tensor:
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = torch.ones(n, n, dtype=torch.bool) if self_loops else ~torch.eye(n, dtype=torch.bool)
    return torch.stack([src[keep], dst[keep]])


TWIN_FEATURES = ("text", "code")
#: k! training graphs with ``all_permutations``: the report's largest k is 8 (40,320 graphs).
TWIN_MAX_K_ALL_PERMUTATIONS = 8


def twin_graph(k: int, perm: Tensor, edge_index: Tensor, features: str = "text") -> Data:
    x = torch.zeros(2 * k, 2 * k)
    idx = torch.arange(k)
    x[idx, idx] = 1.0                      # first group: its own index
    x[k + idx, k + perm] = 1.0             # second group: its label
    if features == "code":
        x[k + idx, idx] = 1.0              # ... and, in the authors' code, its index too
    y = torch.cat([perm, perm]).long()
    return Data(x=x, edge_index=edge_index, y=y)


def _all_permutations(k: int, generator: torch.Generator) -> Tensor:
    """The ``k!`` permutations of ``0..k-1`` (rows), in a seeded random order."""
    perms = torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long)
    return perms[torch.randperm(perms.size(0), generator=generator)]


@register_dataset("twin", kind="inductive", metric="accuracy", source="zoo.datasets.synthetic (twin)",
                  options={"k": 4, "num_train": 8, "num_val": 2, "num_test": 2, "self_loops": False,
                           "features": "text", "all_permutations": False},
                  synthetic=True, stats={"graphs": 12, "nodes": "2k per graph", "features": "2k", "classes": "k"})
def load_twin(root: Path, split: Union[int, str, None], seed: int, k: int = 4, num_train: int = 8,
              num_val: int = 2, num_test: int = 2, self_loops: bool = False, features: str = "text",
              all_permutations: bool = False) -> Task:
    if not (isinstance(k, int) and k >= 2):
        raise ValueError(f"twin: k must be an int >= 2, got {k!r}")
    if min(num_train, num_val, num_test) < 1:
        raise ValueError("twin: num_train, num_val and num_test must be >= 1")
    if split not in (None, "random"):
        raise ValueError(f"twin has one seeded split; got split={split!r}")
    if features not in TWIN_FEATURES:
        raise unknown_name_error("twin feature set", features, TWIN_FEATURES,
                                 hint="text: the report's §4.5.1; code: the authors' kn_artificial.")
    if all_permutations and k > TWIN_MAX_K_ALL_PERMUTATIONS:
        raise ValueError(f"twin: all_permutations=True makes k! training graphs; k={k} would be "
                         f"{math.factorial(k):,} (the report stops at k = {TWIN_MAX_K_ALL_PERMUTATIONS}); "
                         "use num_train random graphs instead")
    g = _generator(seed, 1_000 + k)
    edge_index = complete_edge_index(2 * k, self_loops)
    counts = {"train": num_train, "val": num_val, "test": num_test}
    perms = {s: [torch.randperm(k, generator=g) for _ in range(c)] for s, c in counts.items()}
    if all_permutations:  # drawn after the random ones: val/test stay those of the default reading
        perms["train"] = list(_all_permutations(k, g))
    graphs = {s: [twin_graph(k, p, edge_index, features) for p in ps] for s, ps in perms.items()}
    options = (f", features={features}" if features != "text" else "") + (
        ", all_permutations=True" if all_permutations else "")
    return Task(name="twin", kind="inductive", metric="accuracy", num_features=2 * k, num_classes=k,
                multilabel=False, graphs=graphs, split=f"random:seed={seed}",
                preprocessing=(f"twin(k={k}, self_loops={self_loops}, seed={seed}{options})",),
                source="zoo.datasets.synthetic.load_twin")


# ----------------------------------------------------------------------------- arxiv_like

ARXIV_SHAPE = {"num_nodes": 169343, "num_edges": 1166243, "num_features": 128, "num_classes": 40}
# ogbn-arxiv's official time split: 90,941 / 29,799 / 48,603 nodes.
ARXIV_SPLIT = (90941 / 169343, 29799 / 169343)


def power_law_digraph(num_nodes: int, num_edges: int, generator: torch.Generator,
                      out_exponent: float = 3.0, in_exponent: float = 2.5) -> Tensor:
    """``num_edges`` distinct directed edges, no self-loops, power-law in- and out-degrees.

    Every node gets a Pareto weight ``u ** (-1 / (exponent - 1))`` (degree distribution
    ``P(k) ~ k^-exponent`` in expectation, a Chung-Lu style model); sources and targets are drawn
    independently in proportion to the out- and in-weights, in batches until enough distinct
    pairs exist (inverse-CDF sampling: ``searchsorted`` on the cumulative weights). The default
    exponents give, at ogbn-arxiv's size, a largest in-degree near arxiv's (about 15k vs 13,155).
    Fully vectorised: about a second for ogbn-arxiv's size.
    """
    if num_nodes < 2 or num_edges < 1 or num_edges > num_nodes * (num_nodes - 1):
        raise ValueError(f"cannot place {num_edges} distinct directed edges on {num_nodes} nodes")
    w_out = torch.rand(num_nodes, generator=generator, dtype=torch.float64).clamp_min(1e-12).pow(
        -1.0 / (out_exponent - 1.0))
    w_in = torch.rand(num_nodes, generator=generator, dtype=torch.float64).clamp_min(1e-12).pow(
        -1.0 / (in_exponent - 1.0))
    cdf_out, cdf_in = torch.cumsum(w_out, 0), torch.cumsum(w_in, 0)

    def draw_from(cdf: Tensor, k: int) -> Tensor:
        u = torch.rand(k, generator=generator, dtype=torch.float64) * cdf[-1]
        return torch.searchsorted(cdf, u).clamp_max(num_nodes - 1)

    keys = torch.empty(0, dtype=torch.long)
    while keys.numel() < num_edges:
        draw = int((num_edges - keys.numel()) * 1.2) + 16
        src, dst = draw_from(cdf_out, draw), draw_from(cdf_in, draw)
        keep = src != dst
        keys = torch.unique(torch.cat([keys, src[keep] * num_nodes + dst[keep]]))
        if keys.numel() < num_edges and draw > 50 * num_edges:  # pathological weights: flatten them
            cdf_out, cdf_in = torch.cumsum(w_out.sqrt(), 0), torch.cumsum(w_in.sqrt(), 0)
    keys = keys[torch.randperm(keys.numel(), generator=generator)[:num_edges]].sort().values
    return torch.stack([keys // num_nodes, keys % num_nodes])


@register_dataset("arxiv_like", kind="transductive", metric="accuracy",
                  source="zoo.datasets.synthetic (random graph with ogbn-arxiv's shape)",
                  options={**ARXIV_SHAPE, "feature_signal": 1.0, "undirected": False},
                  synthetic=True, aliases=("synthetic_arxiv",),
                  stats={"nodes": 169343, "edges": 1166243, "features": 128, "classes": 40})
def load_arxiv_like(root: Path, split: Union[int, str, None], seed: int, num_nodes: int = 169343,
                    num_edges: int = 1166243, num_features: int = 128, num_classes: int = 40,
                    feature_signal: float = 1.0, undirected: bool = False) -> Task:
    """A seeded random directed graph with ogbn-arxiv's shape, for scale tests without the data.

    Power-law in/out-degrees (:func:`power_law_digraph`), ``num_classes`` uniform labels,
    float32 features ``feature_signal * centroid[y] + N(0, 1)`` (so the task is learnable from
    features; the graph carries no label signal), and a random split with arxiv's proportions
    (53.7 / 17.6 / 28.7 %). ``num_nodes``/``num_edges`` shrink it for tests.
    """
    for name, v in (("num_nodes", num_nodes), ("num_edges", num_edges), ("num_features", num_features),
                    ("num_classes", num_classes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"arxiv_like: {name} must be a positive int, got {v!r}")
    if split not in (None, "random"):
        raise ValueError(f"arxiv_like has one seeded random split; got split={split!r}")
    from torch_geometric.data import Data as _Data
    from torch_geometric.utils import to_undirected

    g = _generator(seed, 4242)
    edge_index = power_law_digraph(num_nodes, num_edges, g)
    y = torch.randint(0, num_classes, (num_nodes,), generator=g)
    centroids = torch.randn(num_classes, num_features, generator=g)
    x = feature_signal * centroids[y] + torch.randn(num_nodes, num_features, generator=g)
    order = torch.randperm(num_nodes, generator=g)
    n_train, n_val = int(ARXIV_SPLIT[0] * num_nodes), int(ARXIV_SPLIT[1] * num_nodes)
    masks = []
    for idx in (order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]):
        m = torch.zeros(num_nodes, dtype=torch.bool)
        m[idx] = True
        masks.append(m)
    pre = [f"arxiv_like(num_nodes={num_nodes}, num_edges={num_edges}, seed={seed})"]
    if undirected:
        edge_index = to_undirected(edge_index, num_nodes=num_nodes)
        pre.append("undirected")
    data = _Data(x=x, edge_index=edge_index, y=y, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])
    return Task(name="arxiv_like", kind="transductive", metric="accuracy", num_features=num_features,
                num_classes=num_classes, multilabel=False, data=data, split=f"random:seed={seed}",
                preprocessing=tuple(pre), source="zoo.datasets.synthetic.load_arxiv_like")
