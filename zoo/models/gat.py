"""GAT (Veličković et al., ICLR 2018): the original, *static* graph attention."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.nn.base import DeepGNN
from zoo.nn.model import LeakyScoreOptions
from zoo.norms.scores import ADDITIVE, AdditiveScores, ScoreNorm
from zoo.ops.dispatch import gat_attention
from zoo.ops.sparse_linear import linear
from zoo.registry import register_model


def glorot_(tensor: Tensor, fan_in: int, fan_out: int) -> Tensor:
    """Xavier/Glorot uniform with explicit fans (attention vectors are not 2-D matrices)."""
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)


class GATLayer(nn.Module):
    r"""One GAT (v1) layer, ``heads`` heads.

    .. math::
        e_{uv} = \mathrm{LeakyReLU}\big(a_s^\top W h_u + a_t^\top W h_v\big),\qquad
        \alpha_{uv} = \operatorname{softmax}_{u \in \mathcal N(v)} e_{uv},\qquad
        h'_v = \sum_{u \in \mathcal N(v)} \alpha_{uv} W h_u

    per head; heads are concatenated (``concat=True``) or averaged.  A score norm normalises the
    additive score inside the LeakyReLU (``score_kind="additive"``).  Because the score is
    additive in ``u`` and ``v``, the ranking of keys ``u`` is the same for every query ``v``:
    GAT's attention is *static* (Brody et al. 2022).

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, heads * channels)`` if ``concat`` else ``(N, channels)``;
        alpha: ``(E, heads)`` for the edges of ``graph.edge_index``.
    """

    def __init__(
        self,
        in_dim: int,
        channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        attn_dropout: float = 0.0,
        bias: bool = False,
        score_norm: Optional[ScoreNorm] = None,
    ) -> None:
        super().__init__()
        self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, heads, concat
        self.negative_slope, self.attn_dropout = negative_slope, attn_dropout
        self.lin = nn.Linear(in_dim, heads * channels, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, channels))
        self.att_dst = nn.Parameter(torch.empty(heads, channels))
        self.bias = nn.Parameter(torch.empty(heads * channels if concat else channels)) if bias else None
        self.score_norm = score_norm
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        for att in (self.att_src, self.att_dst):
            glorot_(att, 1, self.heads * self.channels)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def score_bias(self, graph: Graph) -> Optional[Tensor]:
        """Extra ``(E, heads)`` term inside the LeakyReLU (GATDB / GATNB override this)."""
        return None

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        n = graph.num_nodes
        xw = linear(x, self.lin.weight).view(n, self.heads, self.channels)
        normalize = None
        if self.score_norm is not None:
            normalize = lambda scores: self.score_norm.normalize(  # noqa: E731
                AdditiveScores(graph, xw, self.att_src, self.att_dst, scores))
        out, alpha = gat_attention(xw, self.att_src, self.att_dst, graph, self.negative_slope,
                                   bias=self.score_bias(graph), normalize=normalize,
                                   attn_dropout=self.attn_dropout, training=self.training)
        out = out.reshape(n, -1) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out, alpha

    #: this forward reads ``x`` through ``linear`` alone (zoo.nn.base.DeepGNN: its dropped input then
    #: need not be written densely)
    input_to_linear_only = forward

    # rescaling symmetry (balance paper, Remark 2.5: v1 version of Thm. 2.2)
    def incoming_params(self) -> List[Tensor]:
        return [self.lin.weight] + ([self.bias] if self.bias is not None and self.concat else [])

    def attention_params(self) -> List[Tensor]:
        return [self.att_src, self.att_dst]

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin.weight]

    def bias_params(self) -> List[Tensor]:
        return [self.bias] if self.bias is not None else []


@register_model("gat")
class GAT(DeepGNN):
    """Deep GAT (v1): ``num_layers`` :class:`GATLayer` s with the shared depth machinery of :class:`DeepGNN`."""

    family = "gat"
    layer_class = GATLayer
    score_kind = ADDITIVE
    options_class = LeakyScoreOptions

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return self.layer_class(
            in_dim, channels, heads, concat, options.negative_slope, options.attn_dropout, self.bias, score_norm
        )
