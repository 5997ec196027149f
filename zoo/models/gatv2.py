"""GATv2 (Brody, Alon & Yahav, ICLR 2022): *dynamic* graph attention."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from zoo._names import choice
from zoo.graph import Graph
from zoo.models.gat import glorot_
from zoo.nn.base import DeepGNN
from zoo.nn.model import LeakyScoreOptions
from zoo.norms.scores import MLP, MLPScores, ScoreNorm
from zoo.ops.dispatch import gatv2_attention
from zoo.ops.sparse_linear import linear
from zoo.registry import register_model

UPDATE_WEIGHTS = ("source", "separate")


class GATv2Layer(nn.Module):
    r"""One GATv2 layer (balance paper Eqs. 1-2), ``heads`` heads.

    .. math::
        e_{uv} = a^\top \mathrm{LeakyReLU}\big(W_s h_u + W_t h_v\,[+\,W_e f_{uv}]\,[+\,b]\big),\qquad
        \alpha_{uv} = \operatorname{softmax}_{u \in \mathcal N(v)} e_{uv},\qquad
        h'_v = \sum_{u \in \mathcal N(v)} \alpha_{uv}\, U h_u

    with ``W_s = W_t`` when ``share_weights`` (default), ``b`` only with ``attention_bias``,
    and the update matrix ``U = W_s`` (``update_weight="source"``, as Brody et al.'s code) or
    a third learnt matrix (``"separate"``, report §5.2 variant d).  With ``edge_dim`` the edge
    features ``f_uv`` enter the score through ``W_e`` inside the LeakyReLU, exactly as PyG's
    ``GATv2Conv(edge_dim=...)`` (Brody et al.'s code); the message stays ``U h_u``.

    Shapes:
        x: ``(N, in_dim)``; edge_attr: ``(E, edge_dim)`` aligned with ``graph.edge_index`` ->
        out: ``(N, heads * channels)`` if ``concat`` else ``(N, channels)``;
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
        share_weights: bool = True,
        attention_bias: bool = False,
        update_weight: str = "source",
        edge_dim: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, heads, concat
        self.negative_slope, self.attn_dropout = negative_slope, attn_dropout
        self.share_weights, self.update_weight = share_weights, update_weight
        width = heads * channels
        self.lin_src = nn.Linear(in_dim, width, bias=False)
        self.lin_dst = None if share_weights else nn.Linear(in_dim, width, bias=False)
        self.lin_update = nn.Linear(in_dim, width, bias=False) if update_weight == "separate" else None
        self.lin_edge = nn.Linear(edge_dim, width, bias=False) if edge_dim else None
        self.att = nn.Parameter(torch.empty(heads, channels))
        self.att_bias = nn.Parameter(torch.empty(heads, channels)) if attention_bias else None
        self.bias = nn.Parameter(torch.empty(width if concat else channels)) if bias else None
        self.score_norm = score_norm
        self.reset_parameters()

    def _linears(self) -> List[nn.Linear]:
        return [m for m in (self.lin_src, self.lin_dst, self.lin_update) if m is not None]

    def reset_parameters(self) -> None:
        for lin in self._linears() + ([self.lin_edge] if self.lin_edge is not None else []):
            nn.init.xavier_uniform_(lin.weight)
        glorot_(self.att, 1, self.heads * self.channels)
        for p in (self.att_bias, self.bias):
            if p is not None:
                nn.init.zeros_(p)

    def forward(self, graph: Graph, x: Tensor, edge_attr: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        n = graph.num_nodes
        shape = (n, self.heads, self.channels)
        x_src = linear(x, self.lin_src.weight).view(shape)
        x_dst = None if self.lin_dst is None else linear(x, self.lin_dst.weight).view(shape)
        terms = []
        if self.lin_edge is not None:
            if edge_attr is None:
                raise ValueError("this GATv2 layer has an edge term (edge_dim) and needs edge_attr")
            terms.append(self.lin_edge(edge_attr).view(-1, self.heads, self.channels))
        if self.att_bias is not None:
            terms.append(self.att_bias)
        score = None
        if self.score_norm is not None:
            score = lambda hidden: self.score_norm.normalize(  # noqa: E731
                MLPScores(graph, hidden, self.att, self.negative_slope))
        # U h_u with a third matrix (update_weight="separate"), else the messages are W_s h_u
        values = None if self.lin_update is None else linear(x, self.lin_update.weight).view(shape)
        out, alpha = gatv2_attention(x_src, x_dst, self.att, graph, self.negative_slope, values=values,
                                     terms=terms, score=score, attn_dropout=self.attn_dropout,
                                     training=self.training)
        out = out.reshape(n, -1) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out, alpha

    #: this forward reads ``x`` through ``linear`` alone (zoo.nn.base.DeepGNN: its dropped input then
    #: need not be written densely)
    input_to_linear_only = forward

    # rescaling symmetry: Thm. 2.2 (shared), 6.3 (unshared; W_t's outgoing columns also rescale), 6.4 (heads)
    def incoming_params(self) -> List[Tensor]:
        # W_e's row i feeds neuron i's pre-activation like W_s's: it rescales with the incoming side.
        extra = [p for p in (self.att_bias,) if p is not None]
        if self.lin_edge is not None:
            extra.append(self.lin_edge.weight)
        if self.bias is not None and self.concat:
            extra.append(self.bias)
        return [lin.weight for lin in self._linears()] + extra

    def attention_params(self) -> List[Tensor]:
        return [self.att]

    def outgoing_params(self) -> List[Tensor]:
        return [lin.weight for lin in self._linears()]

    def bias_params(self) -> List[Tensor]:
        return [p for p in (self.att_bias, self.bias) if p is not None]

    def target_params(self) -> List[Tensor]:
        return [self.lin_dst.weight] if self.lin_dst is not None else []


@dataclass(frozen=True)
class GATv2Options(LeakyScoreOptions):
    """Options of a GATv2 layer.

    Args:
        share_weights: ``W_s = W_t`` (Brody et al.'s experiments; the balance paper's default).
        attention_bias: a bias ``b`` inside the LeakyReLU (the report's §3.1 "bias vector" ambiguity).
        update_weight: ``"source"`` (``U = W_s``) or ``"separate"`` (a third learnt update matrix,
            report §5.2 variant d; needs ``share_weights=False``).
    """

    share_weights: bool = True
    attention_bias: bool = False
    update_weight: str = "source"

    def __post_init__(self) -> None:
        super().__post_init__()
        update_weight = choice("update_weight", self.update_weight, UPDATE_WEIGHTS)
        if self.share_weights and update_weight == "separate":
            raise ValueError(
                "update_weight='separate' learns a third matrix next to unshared W_s and W_t; "
                "it needs share_weights=False (report §5.2, variant d)"
            )
        object.__setattr__(self, "update_weight", update_weight)


@register_model("gatv2")
class GATv2(DeepGNN):
    """Deep GATv2: ``num_layers`` :class:`GATv2Layer` s on the :class:`DeepGNN` machinery."""

    family = "gatv2"
    supports_edge_features = True
    score_kind = MLP
    options_class = GATv2Options

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return GATv2Layer(
            in_dim, channels, heads, concat, options.negative_slope, options.attn_dropout, self.bias, score_norm,
            share_weights=options.share_weights, attention_bias=options.attention_bias,
            update_weight=options.update_weight, edge_dim=self.edge_dim,
        )
