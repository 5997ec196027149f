"""GCN (Kipf & Welling, ICLR 2017) — the attention-free member of the family."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from zoo._names import choice
from zoo.graph import Graph
from zoo.nn.base import DeepGNN
from zoo.nn.model import LayerOptions
from zoo.ops.propagate import propagate
from zoo.ops.sparse_linear import linear
from zoo.registry import register_model

NORMALIZATIONS = ("symmetric", "mean")


def propagation_coefficients(graph: Graph, normalization: str, dtype: Optional[torch.dtype] = None) -> Tensor:
    """``(E, 1)`` edge coefficients: ``1/sqrt(d_u d_v)`` (symmetric) or ``1/d_v`` (mean), in
    ``dtype`` (that of the features; default: torch's default dtype).

    Degrees count incoming edges after the self-loop policy (as PyG's ``gcn_norm``).
    """
    dtype = dtype or torch.get_default_dtype()

    def compute() -> Tensor:
        deg = graph.in_degree(dtype)
        if normalization == "mean":
            coef = deg.reciprocal().index_select(0, graph.dst)
        else:
            inv_sqrt = deg.pow(-0.5).masked_fill(deg == 0, 0.0)
            coef = inv_sqrt.index_select(0, graph.src) * inv_sqrt.index_select(0, graph.dst)
        return coef.unsqueeze(-1)

    return graph.cached(f"gcn_{normalization}", compute, dtype=dtype)


class GCNLayer(nn.Module):
    r"""One GCN layer.

    .. math::
        h'_v = \sum_{u \in \mathcal N(v)} c_{uv}\, W h_u,\qquad
        c_{uv} = \frac{1}{\sqrt{\tilde d_u \tilde d_v}}\ \text{(symmetric)}\quad\text{or}\quad
        c_{uv} = \frac{1}{\tilde d_v}\ \text{(mean)}

    over neighbourhoods with self-loops.  ``mean`` is exactly a GAT layer with ``a = 0``
    (uniform attention ``1/|N(v)|``), the special case of the balance paper's Remark 2.5.

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, channels)``; alpha: ``(E, 1)`` (the coefficients ``c_uv``).
    """

    heads = 1
    concat = True

    def __init__(self, in_dim: int, channels: int, normalization: str = "symmetric", bias: bool = False) -> None:
        super().__init__()
        self.in_dim, self.channels, self.normalization = in_dim, channels, normalization
        self.lin = nn.Linear(in_dim, channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    #: ``forward(..., relu=True)`` returns the layer's ReLU (the model then applies none of its own)
    fuses_relu = True

    def forward(self, graph: Graph, x: Tensor, relu: bool = False) -> Tuple[Tensor, Tensor]:
        """``relu``: the output's ReLU, inside the propagation's product where no bias follows it."""
        coef = propagation_coefficients(graph, self.normalization, x.dtype)
        xw = linear(x, self.lin.weight)
        # one CSR product with the constant coefficients (no (E, C) tensor; replicas: one product)
        fused = relu and self.bias is None
        out = propagate(graph, coef, xw, key=f"gcn_{self.normalization}", relu=fused)
        if self.bias is not None:
            out = out + self.bias
        return (torch.relu(out) if relu and not fused else out), coef

    def incoming_params(self) -> List[Tensor]:
        return [self.lin.weight] + ([self.bias] if self.bias is not None else [])

    def attention_params(self) -> List[Tensor]:
        return []

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin.weight]

    def bias_params(self) -> List[Tensor]:
        return [self.bias] if self.bias is not None else []


@dataclass(frozen=True)
class GCNOptions(LayerOptions):
    """Options of a GCN layer.

    Args:
        normalization: ``"symmetric"`` (``c_uv = 1 / sqrt(d_u d_v)``, Kipf & Welling) or ``"mean"``
            (``c_uv = 1 / d_v``), with degrees counted after the self-loop policy (PyG's ``gcn_norm``).
    """

    normalization: str = "symmetric"

    def __post_init__(self) -> None:
        object.__setattr__(self, "normalization", choice("normalization", self.normalization, NORMALIZATIONS))


@register_model("gcn")
class GCN(DeepGNN):
    """Deep GCN; ``normalization="mean"`` gives GAT with ``a = 0``. GCN has no heads."""

    family = "gcn"
    attention_normalized = False
    supports_heads = False
    options_class = GCNOptions

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return GCNLayer(in_dim, channels, options.normalization, self.bias)
