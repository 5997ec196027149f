r"""Oversmoothing diagnostics (Guan & He, *Solving Oversmoothing in GNNs via Nonlocal Message
Passing*, §2 and §5): node-similarity energies, per-layer energy traces, inter-layer cosine
similarities and layer-pruning sensitivity.

Energies use the simple undirected graph of the input (edges symmetrised, self-loops and
duplicates dropped), weights ``omega_ij = 1`` and measure ``mu_i = deg_i + 1`` (§2):

.. math::
    \Delta_\mu X(i) = \sum_{j \sim i} \frac{\omega_{ij}}{\mu_i}\,(X(j) - X(i)),\qquad
    \mathcal E_1(X) = \frac1n \int_G |\nabla_\mu X|^2 d\mu
                    = \frac1n \sum_i \sum_{j \sim i} \omega_{ij} |X(j) - X(i)|^2,\qquad
    \mathcal E_2(X) = \frac1n \sum_i \mu_i\, |\Delta_\mu X(i)|^2

(Dirichlet and Laplacian energy; every ordered pair ``j ~ i`` counts, as in the integral).
Both vanish exactly on constant features (Def. 2.1).

Layer hooks: every registered model exposes ``taps`` (one ``nn.Identity`` per layer output)
and ``skipped_layers``; the functions below attach forward hooks to the taps and restore the
model afterwards.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import torch
from torch import Tensor, nn

from zoo._names import unknown_name_error
from zoo.graph import Graph, GraphLike, as_graph
from zoo.ops.segment import neighbour_difference_sum

__all__ = [
    "dirichlet_energy", "laplacian_energy", "relative_energy", "ENERGIES",
    "layer_representations", "energy_trace", "loglog_slope", "cosine_similarity", "similarity_matrix",
    "layer_pruning_sensitivity",
]


def _simple_undirected(graph: GraphLike, num_nodes: Optional[int]) -> Graph:
    """The graph with every edge in both directions once and no self-loops (cached)."""
    x_stub = None if num_nodes is None else torch.empty(num_nodes, 0)
    g = as_graph(graph, x_stub, "remove")

    def compute():
        n = g.num_nodes
        ei = torch.cat([g.edge_index, g.edge_index.flip(0)], dim=1)
        key = torch.unique(ei[1] * n + ei[0])
        return torch.stack([key % n, key // n])

    return Graph(g.cached("simple_undirected", compute), g.num_nodes, "remove")


def _check(x: Tensor, g: Graph) -> Tensor:
    if x.dim() != 2 or x.size(0) != g.num_nodes:
        raise ValueError(f"features must be (N, d) with N = {g.num_nodes} nodes, got shape {tuple(x.shape)}")
    return x


def dirichlet_energy(graph: GraphLike, x: Tensor) -> Tensor:
    r"""Dirichlet energy :math:`\mathcal E_1(X) = \frac1n\sum_i\sum_{j\sim i}|X(j)-X(i)|^2` (scalar)."""
    g = _simple_undirected(graph, x.size(0))
    x = _check(x, g)
    diff = x.index_select(0, g.src) - x.index_select(0, g.dst)
    return diff.pow(2).sum() / g.num_nodes


def laplacian_energy(graph: GraphLike, x: Tensor) -> Tensor:
    r"""Laplacian energy :math:`\mathcal E_2(X) = \frac1n\sum_i \mu_i |\Delta_\mu X(i)|^2`,
    ``mu_i = deg_i + 1`` (scalar)."""
    g = _simple_undirected(graph, x.size(0))
    x = _check(x, g)
    n = g.num_nodes
    summed = neighbour_difference_sum(x, g.src, g.dst, n)  # sum_{j -> i} X(j) - X(i)
    mu = x.new_zeros(n).index_add(0, g.dst, x.new_ones(g.num_edges)) + 1.0
    delta = summed / mu.unsqueeze(-1)
    return (mu * delta.pow(2).sum(-1)).sum() / n


ENERGIES: Dict[str, Callable[[GraphLike, Tensor], Tensor]] = {
    "dirichlet": dirichlet_energy,
    "laplacian": laplacian_energy,
}


def relative_energy(energies: Sequence[float]) -> Tensor:
    r"""Relative node similarity (Def. 2.2): :math:`R(X^k) = (E(X^k) - E(X^{k-1})) / E(X^{k-1})`
    for ``k = 1..K`` of a trace ``E(X^0), ..., E(X^K)`` (length ``K``)."""
    e = torch.as_tensor(energies, dtype=torch.float64)
    if e.numel() < 2:
        raise ValueError("relative_energy needs a trace of at least two energies")
    return (e[1:] - e[:-1]) / e[:-1]


@contextmanager
def _hooked_taps(model: nn.Module) -> Iterator[Dict[int, Tensor]]:
    taps = getattr(model, "taps", None)
    if taps is None:
        raise TypeError(f"{type(model).__name__} has no `taps`: layer diagnostics need the zoo's model protocol "
                        "(one nn.Identity tap per layer output)")
    captured: Dict[int, Tensor] = {}
    handles = [tap.register_forward_hook(lambda _m, _i, out, k=k: captured.__setitem__(k, out.detach()))
               for k, tap in enumerate(taps)]
    try:
        yield captured
    finally:
        for h in handles:
            h.remove()


def layer_representations(model: nn.Module, graph: GraphLike, x: Tensor) -> List[Tensor]:
    """Each layer's output representation ``X^1, ..., X^L`` (detached), read from the model's taps
    in one no-grad forward pass (the model's train/eval mode is left as it is)."""
    with _hooked_taps(model) as captured, torch.no_grad():
        model(graph, x)
    return [captured[k] for k in sorted(captured)]


def energy_trace(model: nn.Module, graph: GraphLike, x: Tensor, energy: str = "laplacian",
                 include_input: bool = False) -> Tensor:
    """Energy of every layer's output, ``(L,)`` float64 (``(L + 1,)`` with the input features
    first when ``include_input``).  ``energy``: ``laplacian`` (default, the paper's measure) or
    ``dirichlet``.  Fig. 1 plots this against the layer index on log-log axes."""
    if energy not in ENERGIES:
        raise unknown_name_error("energy", energy, ENERGIES)
    fn = ENERGIES[energy]
    reps = ([x] if include_input else []) + layer_representations(model, graph, x)
    return torch.stack([fn(graph, r).double() for r in reps])


def loglog_slope(trace: Sequence[float], first_layer: int = 1) -> float:
    r"""Least-squares slope of :math:`\log_{10} E_k` against :math:`\log_{10} k` over a per-layer
    energy trace (layer ``k = first_layer, first_layer + 1, ...``; non-positive entries dropped).

    Fig. 1 of the nonlocal paper is this plot: a power law :math:`E_k \propto k^{s}` is a straight
    line of slope ``s`` (nonlocal Post-LN: algebraic decay, ``s < 0`` moderate; Pre-LN: growth,
    ``s > 0``), while Post-LN's exponential decay bends ever steeper.  The slope does not depend
    on a constant factor in the energy, so it compares with the paper where the absolute values
    (Table 6) cannot (``docs/differences.md``).
    """
    pts = [(math.log10(k), math.log10(float(e))) for k, e in enumerate(trace, start=first_layer)
           if e is not None and math.isfinite(float(e)) and float(e) > 0]
    if len(pts) < 2:
        raise ValueError("a log-log slope needs at least two layers with positive energy")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def cosine_similarity(xs: Tensor, xt: Tensor, eps: float = 1e-12) -> Tensor:
    r"""Eq. 1: :math:`\mathrm{sim}(X^s, X^t) = \frac1n \sum_i \frac{X^s(i)\cdot X^t(i)}{|X^s(i)||X^t(i)|}`."""
    if xs.shape != xt.shape:
        raise ValueError(f"cosine similarity needs equal shapes, got {tuple(xs.shape)} and {tuple(xt.shape)}")
    num = (xs * xt).sum(-1)
    den = (xs.norm(dim=-1) * xt.norm(dim=-1)).clamp_min(eps)
    return (num / den).mean()


def similarity_matrix(model: nn.Module, graph: GraphLike, x: Tensor) -> Tensor:
    """The ``(L, L)`` inter-layer cosine-similarity matrix of the layer outputs (Eq. 1, Fig. 2);
    entries between layers of different widths are NaN."""
    reps = layer_representations(model, graph, x)
    L = len(reps)
    out = torch.full((L, L), float("nan"), dtype=torch.float64)
    for s in range(L):
        for t in range(s, L):
            if reps[s].shape == reps[t].shape:
                out[s, t] = out[t, s] = cosine_similarity(reps[s].double(), reps[t].double())
    return out


def layer_pruning_sensitivity(model: nn.Module, graph: GraphLike, x: Tensor, y: Tensor,
                              mask: Optional[Tensor] = None,
                              layers: Optional[Iterable[int]] = None) -> Dict[str, object]:
    """Accuracy with each layer ``k`` skipped (``X^{k+1} = X^k``), Table 8 of the nonlocal-MP paper.

    Args:
        y: ``(N,)`` class labels; mask: the nodes to score (e.g. the test mask; default all).
        layers: the layer indices to prune one at a time (default all that can be skipped).

    Returns ``{"baseline": acc, "pruned": {k: acc}}``; layers that change the width are omitted
    from the default set.  The model is evaluated in eval mode and restored afterwards.
    """
    if not hasattr(model, "skipped_layers"):
        raise TypeError(f"{type(model).__name__} has no `skipped_layers`: it does not support layer pruning")
    idx = torch.arange(y.size(0)) if mask is None else (mask.nonzero().view(-1) if mask.dtype == torch.bool else mask)
    was_training, saved = model.training, set(model.skipped_layers)

    def accuracy() -> float:
        with torch.no_grad():
            pred = model(graph, x).argmax(-1)
        return float((pred[idx] == y[idx]).double().mean())

    model.eval()
    try:
        model.skipped_layers = set()
        baseline = accuracy()
        candidates = range(model.num_layers) if layers is None else layers
        pruned: Dict[int, float] = {}
        for k in candidates:
            model.skipped_layers = {int(k)}
            try:
                pruned[int(k)] = accuracy()
            except ValueError:
                if layers is not None:
                    raise
    finally:
        model.skipped_layers = saved
        model.train(was_training)
    return {"baseline": baseline, "pruned": pruned}
