"""GGNN (Li, Tarlow, Brockschmidt & Zemel, ICLR 2016): gated graph neural network."""
from __future__ import annotations

from typing import Any, List, Tuple

import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.nn.base import DeepGNN
from zoo.ops.segment import gather_rows, segment_sum
from zoo.registry import register_model


class GGNNLayer(nn.Module):
    r"""One GGNN propagation step with a GRU update.

    .. math::
        m_v = \sum_{u \in \mathcal N(v)} W h_u,\qquad h'_v = \mathrm{GRU}(m_v,\ P h_v)

    where ``P`` is the identity when ``in_dim == channels`` and a learnt projection otherwise
    (GGNN zero-pads inputs; a projection also lets the last layer map to the class count).
    The GRU is written out with linear maps (``torch.func.vmap`` has no rule for ``gru_cell``).

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, channels)``; alpha: ``(E, 1)`` (all ones).
    """

    heads = 1
    concat = True

    def __init__(self, in_dim: int, channels: int, bias: bool = True) -> None:
        super().__init__()
        self.in_dim, self.channels = in_dim, channels
        self.lin = nn.Linear(in_dim, channels, bias=False)
        self.project = None if in_dim == channels else nn.Linear(in_dim, channels, bias=False)
        self.gates_input = nn.Linear(channels, 3 * channels, bias=bias)   # r, z, n from the message
        self.gates_hidden = nn.Linear(channels, 3 * channels, bias=bias)  # r, z, n from the state
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin, self.project, self.gates_input, self.gates_hidden):
            if lin is not None:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        message = segment_sum(gather_rows(self.lin(x), graph.src), graph.dst, graph.num_nodes)
        state = x if self.project is None else self.project(x)
        i_r, i_z, i_n = self.gates_input(message).chunk(3, dim=-1)
        h_r, h_z, h_n = self.gates_hidden(state).chunk(3, dim=-1)
        reset = torch.sigmoid(i_r + h_r)
        update = torch.sigmoid(i_z + h_z)
        candidate = torch.tanh(i_n + reset * h_n)
        return (1 - update) * candidate + update * state, x.new_ones(graph.num_edges, 1)

    def incoming_params(self) -> List[Tensor]:
        return [self.lin.weight]

    def attention_params(self) -> List[Tensor]:
        return []

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin.weight]

    def bias_params(self) -> List[Tensor]:
        return [lin.bias for lin in (self.gates_input, self.gates_hidden) if lin.bias is not None]


@register_model("ggnn")
class GGNN(DeepGNN):
    """Deep GGNN (one GRU propagation step per layer, untied weights); a TREES baseline of the
    LipschitzNorm paper. The GRU supplies the non-linearity, so ``activation`` defaults to identity; ``bias``
    (the GRU gates' biases, as ``torch.nn.GRUCell``) defaults to true."""

    family = "ggnn"
    attention_normalized = False
    supports_heads = False
    default_self_loops = "remove"
    conservation_law_exception = "the GRU update (sigmoid/tanh gates) is not positively homogeneous"

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 2, *,
                 activation: str = "identity", bias: bool = True, **common: Any) -> None:
        super().__init__(in_dim, out_dim, hidden_dim, num_layers, activation=activation, bias=bias, **common)

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return GGNNLayer(in_dim, channels, bias=self.bias)
