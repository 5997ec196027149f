"""Graph-level readout plugins and the graph-task head :class:`GraphPool`.

A readout maps node representations ``h`` ``(N, D)`` and the graph index of every node
``batch`` ``(N,)`` to one vector per graph ``(num_graphs, D)``:

* ``mean``: :math:`r_g = \\frac{1}{|V_g|}\\sum_{v \\in V_g} h_v` (the default; Oxford report §5.2.1);
* ``sum``: :math:`r_g = \\sum_{v \\in V_g} h_v`;
* ``attention``: global attention pooling (Li et al., 2016, "Gated Graph Sequence Neural
  Networks", Eq. 7; PyG ``AttentionalAggregation`` with a linear gate):
  :math:`r_g = \\sum_{v \\in V_g} \\operatorname{softmax}_{v \\in V_g}(w^\\top h_v + b)\\, h_v`.

Names are normalised (``"Mean"``, ``"global-attention"`` ...); unknown names list near matches.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import Tensor, nn

from zoo._names import Registry
from zoo.ops.segment import segment_softmax, segment_sum

READOUTS: Registry[Callable[[int], nn.Module]] = Registry("readout")


class SumReadout(nn.Module):
    """Shapes: ``h`` ``(N, D)``, ``batch`` ``(N,)`` -> ``(num_graphs, D)``."""

    def forward(self, h: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        return segment_sum(h, batch, num_graphs)


class MeanReadout(nn.Module):
    """Shapes: ``h`` ``(N, D)``, ``batch`` ``(N,)`` -> ``(num_graphs, D)``; empty graphs give 0."""

    def forward(self, h: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        counts = torch.zeros(num_graphs, dtype=h.dtype, device=h.device).index_add(
            0, batch, torch.ones_like(batch, dtype=h.dtype))
        return segment_sum(h, batch, num_graphs) / counts.clamp(min=1).unsqueeze(-1)


class AttentionReadout(nn.Module):
    """Global attention pooling with a linear gate ``w^T h_v + b`` (softmax over each graph's nodes).

    Shapes: ``h`` ``(N, D)``, ``batch`` ``(N,)`` -> ``(num_graphs, D)``.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)  # the linear gate w^T h_v + b

    def forward(self, h: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        weights = segment_softmax(self.score(h), batch, num_graphs)  # (N, 1)
        return segment_sum(weights * h, batch, num_graphs)


READOUTS.add("mean", lambda dim: MeanReadout(), aliases=("global_mean", "mean_pool"))
READOUTS.add("sum", lambda dim: SumReadout(), aliases=("add", "global_add", "global_sum", "sum_pool"))
READOUTS.add("attention", AttentionReadout, aliases=("global_attention", "attn", "gated"))


def make_readout(name: Any, dim: int) -> nn.Module:
    """The readout ``name`` (or a module, used as is) for ``dim``-wide node representations."""
    if isinstance(name, nn.Module):
        return name
    return READOUTS.get("mean" if name is None else name)(dim)


class GraphPool(nn.Module):
    """Graph-level head: a node-level ``gnn``, a readout, then a 2-layer MLP (Oxford report §5.2.1).

    ``forward(graph, x, batch, num_graphs, edge_attr=None)``: ``x`` ``(N, in_dim)`` node
    features of all graphs of a mini-batch, ``batch`` ``(N,)`` their graph index ->
    ``(num_graphs, num_outputs)``.  ``edge_attr`` ``(E, D_e)`` is passed to models with an
    ``edge_encoder``.
    """

    def __init__(self, gnn: nn.Module, pooled_dim: int, num_outputs: int, hidden: int = 8,
                 readout: Any = "mean") -> None:
        super().__init__()
        self.gnn = gnn
        # how to rebuild this head (zoo.save); None when the readout is a module (it cannot be named)
        self.config = None if isinstance(readout, nn.Module) else {
            "pooled_dim": pooled_dim, "num_outputs": num_outputs, "hidden": hidden, "readout": readout}
        self.readout = make_readout(readout, pooled_dim)
        self.mlp = nn.Sequential(nn.Linear(pooled_dim, hidden), nn.ReLU(), nn.Linear(hidden, num_outputs))

    def forward(self, graph: Any, x: Tensor, batch: Tensor, num_graphs: int,
                edge_attr: Optional[Tensor] = None) -> Tensor:
        h = self.gnn(graph, x) if edge_attr is None else self.gnn(graph, x, edge_attr=edge_attr)
        return self.mlp(self.readout(h, batch, num_graphs))


__all__ = ["READOUTS", "SumReadout", "MeanReadout", "AttentionReadout", "make_readout", "GraphPool"]
