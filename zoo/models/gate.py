"""GATE (Mustafa & Burkholz, *GATE: How to Keep Out Intrusive Neighbors*, ICML 2024): graph
attention that can switch neighbourhood aggregation off, because the self-loop has its own
attention parameters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Tuple

import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.models.gat import glorot_
from zoo.nn.base import DeepGNN
from zoo.nn.model import LeakyScoreOptions
from zoo.norms import ScoreNorm, resolve_norm
from zoo.ops.dispatch import attention, gatv2_scores
from zoo.ops.segment import gather_rows
from zoo.ops.sparse_linear import linear
from zoo.registry import register_model


class GATELayer(nn.Module):
    r"""One GATE layer, ``heads`` heads (the authors' code, ``runExp_GAT(E).py``, at their settings).

    .. math::
        e_{uv} = \big(\mathbb 1_{u \ne v}\, a_t + \mathbb 1_{u = v}\, a_s\big)^\top
                 \phi\big(U h_u + V h_v\big),\qquad
        \alpha_{uv} = \operatorname{softmax}_{u \in \mathcal N(v) \cup \{v\}} e_{uv},\qquad
        h'_v = \sum_{u \in \mathcal N(v) \cup \{v\}} \alpha_{uv}\, W h_u

    per head, with ``phi = ReLU`` (``negative_slope = 0``; a positive slope gives LeakyReLU).  With
    ``a_s`` the self-loop gets its own score: a large ``a_s^T phi((U + V) h_v)`` puts
    ``alpha_vv -> 1`` and the layer acts as a perceptron on ``h_v`` (no aggregation), which GAT's
    shared attention vector cannot learn.  ``U``, ``V`` (score) and ``W`` (messages) are three
    separate matrices; with ``share_weights`` one matrix serves all three (``U = V = W``, the
    authors' ``GATE_S`` rows for the real data sets).  The self-loop score is computed per node (``O(N)``) and replaces the score
    of each ``u = v`` edge; the neighbour scores and the aggregation take the fused kernels of
    :mod:`zoo.ops.dispatch` where they apply.  Without self-loops (``self_loops="remove"``) no
    edge uses ``a_s``.

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, heads * channels)`` if ``concat`` else ``(N, channels)``;
        alpha: ``(E, heads)`` for the edges of ``graph.edge_index`` (self-loops included).
    """

    def __init__(self, in_dim: int, channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.0, attn_dropout: float = 0.0, bias: bool = False,
                 share_weights: bool = False) -> None:
        super().__init__()
        self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, heads, concat
        self.negative_slope, self.attn_dropout = negative_slope, attn_dropout
        width = heads * channels
        self.lin = nn.Linear(in_dim, width, bias=False)  # W: messages
        self.lin_src = None if share_weights else nn.Linear(in_dim, width, bias=False)  # U: neighbour u
        self.lin_dst = None if share_weights else nn.Linear(in_dim, width, bias=False)  # V: target v
        self.att_nbr = nn.Parameter(torch.empty(heads, channels))  # a_t
        self.att_self = nn.Parameter(torch.empty(heads, channels))  # a_s
        self.bias = nn.Parameter(torch.empty(width if concat else channels)) if bias else None
        self.reset_parameters()

    def _linears(self) -> List[nn.Linear]:
        return [m for m in (self.lin, self.lin_src, self.lin_dst) if m is not None]

    def reset_parameters(self) -> None:
        for lin in self._linears():
            nn.init.xavier_uniform_(lin.weight)
        for att in (self.att_nbr, self.att_self):
            glorot_(att, 1, self.heads * self.channels)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        n = graph.num_nodes
        shape = (n, self.heads, self.channels)
        values = linear(x, self.lin.weight).view(shape)
        x_src = values if self.lin_src is None else linear(x, self.lin_src.weight).view(shape)
        x_dst = None if self.lin_dst is None else linear(x, self.lin_dst.weight).view(shape)
        scores, _ = gatv2_scores(x_src, x_dst, self.att_nbr, graph, self.negative_slope)
        hidden = torch.nn.functional.leaky_relu(x_src + (x_src if x_dst is None else x_dst), self.negative_slope)
        self_scores = (hidden * self.att_self).sum(-1)  # (N, H): the score of edge v -> v
        loops = graph.cached("self_loop_edges", lambda: graph.src == graph.dst).unsqueeze(-1)
        scores = torch.where(loops, gather_rows(self_scores, graph.dst), scores)
        out, alpha = attention(scores, values, graph, attn_dropout=self.attn_dropout, training=self.training)
        out = out.reshape(n, -1) if self.concat else out.mean(dim=1)
        if self.bias is not None:
            out = out + self.bias
        return out, alpha

    # Rescaling symmetry: row i of W, U and V times lambda, a_t[i] and a_s[i] times 1/lambda
    # (phi is positively homogeneous), column i of the next layer's W, U, V times 1/lambda.
    def incoming_params(self) -> List[Tensor]:
        extra = [self.bias] if self.bias is not None and self.concat else []
        return [lin.weight for lin in self._linears()] + extra

    def attention_params(self) -> List[Tensor]:
        return [self.att_nbr, self.att_self]

    def outgoing_params(self) -> List[Tensor]:
        return [lin.weight for lin in self._linears()]

    def bias_params(self) -> List[Tensor]:
        return [self.bias] if self.bias is not None else []

    def target_params(self) -> List[Tensor]:
        return [self.lin_dst.weight] if self.lin_dst is not None else []  # V, which reads only h_v


@dataclass(frozen=True)
class GATEOptions(LeakyScoreOptions):
    """Options of a GATE layer; ``negative_slope`` defaults to ``0`` (ReLU inside the score, the
    authors' setting for GATE).

    Args:
        share_weights: one matrix for the score and the messages (``U = V = W``; the authors'
            ``GATE_S``, used for their real data sets); default three (their synthetic runs).
    """

    negative_slope: float = 0.0
    share_weights: bool = False


@register_model("gate")
class GATE(DeepGNN):
    """Deep GATE: ``num_layers`` :class:`GATELayer` s on the :class:`DeepGNN` machinery.

    Self-loops are added (``self_loops="add"``), since ``a_s`` acts only on them.  Pair with
    ``init="ll_orthogonal"`` (LLortho: looks-linear orthogonal ``W``, ``U``, ``V``, zero attention,
    the authors' setting) or a balanced init.
    """

    family = "gate"
    options_class = GATEOptions

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 2, **common: Any) -> None:
        if isinstance(resolve_norm(common.get("norm"), **(common.get("norm_kwargs") or {})), ScoreNorm):
            # no score_kind: the self-loop vector a_s makes the score none of zoo.norms.scores' kinds
            raise ValueError(f"norm {common['norm']!r} normalises attention scores and has no rule for GATE's score "
                             "(a separate vector on the self-loop); use a feature norm (pairnorm, layernorm) or none")
        super().__init__(in_dim, out_dim, hidden_dim, num_layers, **common)

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return GATELayer(in_dim, channels, heads, concat, options.negative_slope, options.attn_dropout, self.bias,
                         options.share_weights)
