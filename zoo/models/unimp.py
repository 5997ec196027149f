"""UniMP's graph transformer convolution (Shi et al. 2020, "Masked Label Prediction"), the "GT"
of the LipschitzNorm paper: dot-product attention plus a gated root weight."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.nn.base import DeepGNN
from zoo.nn.model import AttentionOptions
from zoo.norms.scores import DOT_PRODUCT, DotProductScores, ScoreNorm
from zoo.ops.dropout import dropout
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum
from zoo.registry import register_model


class UniMPLayer(nn.Module):
    r"""One UniMP / TransformerConv layer, ``heads`` heads.

    .. math::
        \alpha_{vu} = \operatorname{softmax}_{u \in \mathcal N(v)}
            \frac{(W_q h_v)^\top (W_k h_u)}{\sqrt{C}},\qquad
        m_v = \sum_{u \in \mathcal N(v)} \alpha_{vu} W_v h_u,\qquad
        h'_v = \beta_v W_r h_v + (1 - \beta_v)\, m_v,\quad
        \beta_v = \sigma\big(w_g^\top [W_r h_v;\, m_v;\, W_r h_v - m_v]\big)

    (``h'_v = W_r h_v + m_v`` without ``gated``).  Heads are concatenated or averaged before
    the root term.  A ``scores`` norm (LipschitzNorm, Eq. 19) replaces the ``1/sqrt(C)`` scale.
    No key bias: it would shift all of ``v``'s scores equally and never receive a gradient.

    Shapes:
        x: ``(N, in_dim)`` -> out ``(N, heads * channels)`` if ``concat`` else ``(N, channels)``;
        alpha ``(E, heads)``.
    """

    def __init__(self, in_dim: int, channels: int, heads: int = 1, concat: bool = True,
                 attn_dropout: float = 0.0, bias: bool = False, score_norm: Optional[ScoreNorm] = None,
                 gated: bool = True) -> None:
        super().__init__()
        self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, heads, concat
        self.attn_dropout, self.score_norm, self.gated = attn_dropout, score_norm, gated
        width = heads * channels
        out_width = width if concat else channels
        self.lin_query = nn.Linear(in_dim, width, bias=False)
        self.lin_key = nn.Linear(in_dim, width, bias=False)
        self.lin_value = nn.Linear(in_dim, width, bias=False)
        self.lin_root = nn.Linear(in_dim, out_width, bias=bias)
        self.lin_gate = nn.Linear(3 * out_width, 1, bias=False) if gated else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_root, self.lin_gate):
            if lin is not None:
                nn.init.xavier_uniform_(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        n, src, dst = graph.num_nodes, graph.src, graph.dst
        shape = (n, self.heads, self.channels)
        query, key, value = (lin(x).view(shape) for lin in (self.lin_query, self.lin_key, self.lin_value))
        scores = (gather_rows(query, dst) * gather_rows(key, src)).sum(-1)
        if self.score_norm is not None:
            scores = self.score_norm.normalize(DotProductScores(graph, query, key, value, scores))
        else:
            scores = scores / math.sqrt(self.channels)
        alpha = segment_softmax(scores, dst, n)
        weights = dropout(alpha, self.attn_dropout, self.training)
        m = segment_sum(weights.unsqueeze(-1) * gather_rows(value, src), dst, n)
        m = m.reshape(n, -1) if self.concat else m.mean(dim=1)
        root = self.lin_root(x)
        if self.lin_gate is None:
            return root + m, alpha
        beta = torch.sigmoid(self.lin_gate(torch.cat([root, m, root - m], dim=-1)))
        return beta * root + (1 - beta) * m, alpha

    # The rescaling symmetry does not hold (see UniMP.conservation_law_exception); these lists
    # only describe which matrices map into / out of the layer's neurons.
    def incoming_params(self) -> List[Tensor]:
        return [self.lin_value.weight, self.lin_root.weight]

    def attention_params(self) -> List[Tensor]:
        return [self.lin_query.weight, self.lin_key.weight]

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin_query.weight, self.lin_key.weight, self.lin_value.weight, self.lin_root.weight]

    def bias_params(self) -> List[Tensor]:
        return [self.lin_root.bias] if self.lin_root.bias is not None else []


@dataclass(frozen=True)
class UniMPOptions(AttentionOptions):
    """Options of a UniMP layer.

    Args:
        gated: the sigmoid gate ``beta_v`` between the root term and the aggregated message
            (``False``: their sum).
    """

    gated: bool = True


@register_model("unimp", aliases=("gt", "transformer_conv"))
class UniMP(DeepGNN):
    """Deep UniMP graph transformer: ``num_layers`` :class:`UniMPLayer` s on the :class:`DeepGNN`
    machinery (hidden heads concatenated, output heads averaged).

    Self-loops are kept as given (``self_loops="keep"``, as PyG's ``TransformerConv``): the root
    weight already carries each node's own features.
    """

    family = "unimp"
    score_kind = DOT_PRODUCT
    default_self_loops = "keep"
    conservation_law_exception = (
        "dot-product attention is quadratic in the features and the sigmoid gate is not positively "
        "homogeneous: the balance paper's rescaling symmetry does not hold"
    )

    options_class = UniMPOptions

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return UniMPLayer(in_dim, channels, heads, concat, options.attn_dropout, self.bias, score_norm, options.gated)
