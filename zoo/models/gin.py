"""GIN (Xu, Hu, Leskovec & Jegelka, ICLR 2019): sum aggregation with an MLP update."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.nn.base import DeepGNN
from zoo.nn.model import LayerOptions
from zoo.ops.segment import gather_rows, segment_sum
from zoo.registry import register_model


class GINLayer(nn.Module):
    r"""One GIN layer.

    .. math::
        h'_v = \mathrm{MLP}\Big((1 + \epsilon)\, h_v + \sum_{u \in \mathcal N(v)} h_u\Big),
        \qquad \mathrm{MLP}(z) = W_2\, \mathrm{ReLU}(W_1 z)

    over neighbourhoods *without* self-loops (the ``(1+eps) h_v`` term is the root).

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, channels)``; alpha: ``(E, 1)`` (all ones: plain sums).
    """

    heads = 1
    concat = True

    def __init__(self, in_dim: int, channels: int, eps: float = 0.0, train_eps: bool = False,
                 bias: bool = False) -> None:
        super().__init__()
        self.in_dim, self.channels = in_dim, channels
        self.lin1 = nn.Linear(in_dim, channels, bias=bias)
        self.lin2 = nn.Linear(channels, channels, bias=bias)
        self.eps = nn.Parameter(torch.tensor([float(eps)])) if train_eps else None
        self.register_buffer("eps_fixed", torch.tensor([float(eps)]))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin1, self.lin2):
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        eps = self.eps if self.eps is not None else self.eps_fixed
        agg = segment_sum(gather_rows(x, graph.src), graph.dst, graph.num_nodes)
        out = self.lin2(torch.relu(self.lin1((1 + eps) * x + agg)))
        return out, x.new_ones(graph.num_edges, 1)

    # A GIN layer is a 2-layer MLP: its rescaling symmetry is per hidden MLP unit, not per
    # output neuron, so the attention-GNN balancing does not apply (see conservation_law_exception).
    def incoming_params(self) -> List[Tensor]:
        return [self.lin1.weight]

    def attention_params(self) -> List[Tensor]:
        return []

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin1.weight]

    def bias_params(self) -> List[Tensor]:
        return [lin.bias for lin in (self.lin1, self.lin2) if lin.bias is not None]


@dataclass(frozen=True)
class GINOptions(LayerOptions):
    """Options of a GIN layer.

    Args:
        eps: the root weight ``epsilon`` in ``(1 + epsilon) h_v``.
        train_eps: learn ``epsilon`` (one per layer) instead of fixing it.
    """

    eps: float = 0.0
    train_eps: bool = False


@register_model("gin")
class GIN(DeepGNN):
    """Deep GIN (sum aggregation, MLP update); a baseline of the LipschitzNorm paper's TREES study."""

    family = "gin"
    attention_normalized = False
    supports_heads = False
    default_self_loops = "remove"
    conservation_law_exception = (
        "GIN layers contain an inner MLP whose hidden units the balance paper's per-layer law does not cover"
    )

    options_class = GINOptions

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return GINLayer(in_dim, channels, options.eps, options.train_eps, self.bias)
