r"""LipschitzNorm (Dasoulas, Scaman & Virmaux, ICML 2021, §5): a parameter-free normalisation of
attention *scores* that makes an attention layer Lipschitz continuous.

Every score is divided by a scalar bound ``c`` so that ``|g| <= alpha`` and the score's gradient
stays of the order of the input scale (Theorem 2).  Norms and maxima are taken **per head** and
**neighbour-wise**: node ``v``'s attention is its own attention module (one query), so its
bound uses the largest input norm over ``v``'s neighbourhood (paper, "Implementation details").

Score types (one method each; the attention layer calls the one that matches its score):

* linear (GAT v1), Eq. 17 — the score of edge ``u -> v`` is ``a^T x_uv`` with query
  ``a = [a_s ; a_t]`` and input ``x_uv = [W h_u ; W h_v]``:

  .. math:: g_{uv} = \alpha\,\frac{a^\top x_{uv}}{\|a\|_2 \max_{u' \in \mathcal N(v)} \|x_{u'v}\|_2},
            \qquad \max_{u'} \|x_{u'v}\|^2 = \|W h_v\|^2 + \max_{u' \in \mathcal N(v)} \|W h_{u'}\|^2

  (Cauchy-Schwarz gives ``|g| <= alpha`` exactly).  ``W`` itself is covered by Theorem 1's
  ``||W_k||`` factor, as in the authors' GAT-Lip.
* GATv2, Eq. 15 — see :meth:`LipschitzNorm.normalize_gatv2` for the bound used.
* dot product (transformers, UniMP), Eq. 19 — ``g_uv = alpha q_v^T k_u / max{uv, uw, vw}``.

Shapes: scores ``(E, heads)`` in and out; node tensors ``(N, heads, channels)``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.nn.functional import segment_max
from zoo.norms import register_norm

#: Floor of a denominator (an all-zero neighbourhood gives zero scores, not NaN).
_TINY = 1e-12


def safe_norm(t: Tensor) -> Tensor:
    """Euclidean norm over the last dim with a zero (not NaN) gradient at the zero vector
    (dead ReLU units make all-zero rows common in deep models)."""
    return t.pow(2).sum(-1).clamp_min(_TINY**2).sqrt()


def neighbourhood_max(per_edge: Tensor, graph: Graph) -> Tensor:
    """``max`` of a non-negative ``(E, H)`` edge quantity over each destination's incoming edges,
    gathered back to the edges (``(E, H)``).  Empty neighbourhoods never reach an edge."""
    per_node = segment_max(per_edge, graph.dst, graph.num_nodes).clamp_min(0.0)
    return per_node.index_select(0, graph.dst)


@register_norm("lipschitz", aliases=("lipschitznorm", "lipschitz_norm", "lip"))
class LipschitzNorm:
    """LipschitzNorm plugin (kind ``scores``).

    Args:
        alpha: the bound on every normalised score (paper: ``alpha = 1``; ``alpha = 0`` gives
            uniform attention).
    """

    name = "lipschitz"
    kind = "scores"
    placement = "post"  # unused: score norms act inside the attention layer

    def __init__(self, alpha: float = 1.0) -> None:
        if not alpha >= 0:
            raise ValueError(f"lipschitz: alpha must be >= 0 (the bound on |score|), got {alpha}")
        self.alpha = float(alpha)

    def make(self, dim: int) -> nn.Module:
        raise TypeError("lipschitz normalises attention scores inside attention layers; it has no feature module")

    def __repr__(self) -> str:
        return f"LipschitzNorm(alpha={self.alpha})"

    # ---------------------------------------------------------------- GAT (v1): Eq. 17
    def normalize_gat(self, layer: Any, graph: Graph, x: Tensor, xw: Tensor, scores: Tensor) -> Tensor:
        """Linear scores ``a_s^T W h_u + a_t^T W h_v`` (``(E, H)``, pre-LeakyReLU); ``xw`` ``(N, H, C)``."""
        query_norm = safe_norm(torch.cat([layer.att_src, layer.att_dst], dim=-1))  # (H,)
        sq = xw.pow(2).sum(-1)  # (N, H)
        max_src = neighbourhood_max(sq.index_select(0, graph.src), graph)
        input_norm = (sq.index_select(0, graph.dst) + max_src).clamp_min(_TINY**2).sqrt()
        return self.alpha * scores / (query_norm * input_norm).clamp_min(_TINY)

    # ---------------------------------------------------------------- GATv2: Eq. 15
    def normalize_gatv2(
        self, layer: Any, graph: Graph, x: Tensor, x_src: Tensor, x_dst: Tensor, hidden: Tensor
    ) -> Tensor:
        r"""GATv2 scores ``g~(z_uv) = a^T LeakyReLU(z_uv)`` with ``z_uv = W_s h_u + W_t h_v [+ b]``
        (``hidden``, ``(E, H, C)``), normalised by Eq. 15 taking ``z`` as the attention input:

        .. math:: g_{uv} = \frac{\alpha\,\tilde g(z_{uv})}{\max\{\max_{u'}|\tilde g(z_{u'v})|,\;
                  L\,\max_{u'}\|z_{u'v}\|\}},\qquad L = \|a\|_2 \max(1, |\text{slope}|)

        ``L`` is the Lipschitz constant of ``z -> a^T LeakyReLU(z)`` (LeakyReLU is
        ``max(1, |slope|)``-Lipschitz, then Cauchy-Schwarz), so the second term bounds the
        first (``g~(0) = 0``): ``|g| <= alpha``.  Both are computed, as written in Eq. 15.
        ``W_s, W_t`` are again left to Theorem 1's ``||W_k||`` factor.
        """
        raw = (F.leaky_relu(hidden, layer.negative_slope) * layer.att).sum(-1)  # (E, H)
        lipschitz = safe_norm(layer.att) * max(1.0, abs(layer.negative_slope))  # (H,)
        score_bound = neighbourhood_max(raw.abs(), graph)
        input_bound = lipschitz * neighbourhood_max(safe_norm(hidden), graph)
        return self.alpha * raw / torch.maximum(score_bound, input_bound).clamp_min(_TINY)

    # ---------------------------------------------------------------- dot product: Eq. 19
    def normalize_dot(
        self, layer: Any, graph: Graph, query: Tensor, key: Tensor, value: Tensor, scores: Tensor
    ) -> Tensor:
        """Raw dot-product scores ``q_v^T k_u`` (``(E, H)``, unscaled) divided by
        ``max{uv, uw, vw}`` with ``u = ||q_v||`` (node ``v``'s attention has the single query
        ``q_v``), ``v = max_{u in N(v)} ||k_u||``, ``w = max_{u in N(v)} ||v_u||``.

        The authors' code takes ``u`` as the Frobenius norm of *all* queries, which grows like
        ``sqrt(N)`` and flattens attention on large graphs; the per-node ``u`` is Eq. 19 applied
        neighbour-wise, as §5 prescribes for graph attention, and still gives ``|g| <= alpha``.
        """
        u = safe_norm(query).index_select(0, graph.dst)  # (E, H)
        v = neighbourhood_max(safe_norm(key).index_select(0, graph.src), graph)
        w = neighbourhood_max(safe_norm(value).index_select(0, graph.src), graph)
        bound = torch.maximum(torch.maximum(u * v, u * w), v * w)
        return self.alpha * scores / bound.clamp_min(_TINY)
