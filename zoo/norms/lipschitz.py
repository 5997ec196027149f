r"""LipschitzNorm (Dasoulas, Scaman & Virmaux, ICML 2021, §5): a parameter-free normalisation of
attention *scores* that makes an attention layer Lipschitz continuous.

Every score is divided by a scalar bound ``c`` so that ``|g| <= alpha`` and the score's gradient
stays of the order of the input scale (Theorem 2).  Norms and maxima are taken **per head** and
**neighbour-wise**: node ``v``'s attention is its own attention module (one query), so its
bound uses the largest input norm over ``v``'s neighbourhood (paper, "Implementation details").

One rule per score kind (:mod:`zoo.norms.scores`; the attention layer passes a record of its
kind to :meth:`LipschitzNorm.normalize`, whatever its family):

* additive (GAT v1 and every family with ``score_kind="additive"``), Eq. 17 — the score of edge
  ``u -> v`` is ``a^T x_uv`` with query ``a = [a_s ; a_t]`` and input ``x_uv = [W h_u ; W h_v]``:

  .. math:: g_{uv} = \alpha\,\frac{a^\top x_{uv}}{\|a\|_2 \max_{u' \in \mathcal N(v)} \|x_{u'v}\|_2},
            \qquad \max_{u'} \|x_{u'v}\|^2 = \|W h_v\|^2 + \max_{u' \in \mathcal N(v)} \|W h_{u'}\|^2

  (Cauchy-Schwarz gives ``|g| <= alpha`` exactly).  ``W`` itself is covered by Theorem 1's
  ``||W_k||`` factor, as in the authors' GAT-Lip.
* perceptron (GATv2, ``score_kind="mlp"``), Eq. 15 — see :meth:`LipschitzNorm._mlp` for the bound used.
* dot product (transformers, SAN, UniMP; ``score_kind="dot_product"``), Eq. 19 —
  ``g_uv = alpha q_v^T k_u / max{uv, uw, vw}``.

Variants (``norm_kwargs={"variant": ...}``; ``docs/differences.md``):

* ``"paper"`` (default) — the equations above.
* ``"authors_code"`` — additive (GAT v1) scores as the authors' released code computes them
  (``normalizations/lipschitznorm.py`` with ``scale_individually=False``, as their ``DeepGAT``
  builds it for ``norm="lipschitznorm"``):

  .. math:: g_{uv} = \frac{s_{uv}}{4\,\|a\|_F\,\sqrt{M[\mathrm{flat}(v)] + \|W h_u\|^2} + 10^{-12}}

  i.e. the divisor is ``4 ||a||`` (effective ``alpha = 1/4``), ``||a||_F`` is **one** norm over
  all heads' ``[a_s ; a_t]``, the input term uses the edge's *source* norm ``||W h_u||^2`` (a
  per-edge divisor, not one scaling per node) plus the neighbourhood maximum
  ``M[v, h] = max_{u' in N(v)} ||W h_{u'}^{(h)}||^2`` read from the ``(N * H)``-flattened
  ``M`` at position ``v`` (``max_norm.view(-1, 1)[index]``): for ``H > 1`` that is the entry of
  node ``v // H``, head ``v % H``, shared by all heads of the edge (the released indexing,
  reproduced faithfully; exact for ``H = 1``).
* ``"authors_code_si"`` — the same with ``scale_individually=True`` (their ``lipschitznorm-si``):
  ``||a||`` per head.

Shapes: scores ``(E, heads)`` in and out; node tensors ``(N, heads, channels)``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from zoo._names import normalize_name, unknown_name_error
from zoo.graph import Graph
from zoo.ops.bounds import BoundOps, on_replicas
from zoo.ops.message import squared_norm
from zoo.ops.segment import gather_rows, segment_max
from zoo.norms._registry import register_norm
from zoo.norms.scores import AdditiveScores, DotProductScores, MLPScores, ScoreRules, score_rule

#: Floor of a denominator (an all-zero neighbourhood gives zero scores, not NaN).
_TINY = 1e-12
VARIANTS = ("paper", "authors_code", "authors_code_si")


def safe_norm(t: Tensor) -> Tensor:
    """Euclidean norm over the last dim with a zero (not NaN) gradient at the zero vector
    (dead ReLU units make all-zero rows common in deep models)."""
    return t.pow(2).sum(-1).clamp_min(_TINY**2).sqrt()


def _eq17(ops: BoundOps, scores: Tensor, nodes: Tensor, query_norm: Tensor, src: Tensor, dst: Tensor,
          num_nodes: int, alpha: float) -> Tensor:
    """Eq. 17's ``alpha * scores / bound[dst]`` (a rule of :func:`zoo.ops.bounds.on_replicas`): scores
    ``(..., E, H)``, nodes ``(..., N, H, C)``, query norms ``(..., H)``, an optional leading replica dim."""
    sq = squared_norm(nodes)  # (..., N, H)
    max_src = ops.neighbour_max(sq, src, dst, num_nodes).clamp_min(0.0)  # (..., N, H)
    # The bound depends on the destination alone: computed per node and read per edge (the values
    # a per-edge computation gives, with O(N) element-wise work instead of O(E)).
    bound = (query_norm.unsqueeze(-2) * (sq + max_src).clamp_min(_TINY**2).sqrt()).clamp_min(_TINY)
    return ops.scale_divide(scores, bound, dst, alpha)  # alpha * scores / bound[dst]


def _authors_rule(ops: BoundOps, scores: Tensor, nodes: Tensor, att_norm: Tensor, src: Tensor, dst: Tensor,
                  num_nodes: int, alpha: float) -> Tensor:
    """The released rule (module docstring; a rule of :func:`zoo.ops.bounds.on_replicas`): scores
    ``(..., E, H)``, nodes ``(..., N, H, C)``, ``4 ||a||`` as ``(..., 1, 1)`` or ``(..., 1, H)``."""
    norm_x = ops.gather_rows(squared_norm(nodes), src)  # (..., E, H): the edge's source norm
    per_node = ops.segment_max(norm_x, dst, num_nodes).clamp_min(0.0)  # (..., N, H)
    flat = per_node.reshape(*per_node.shape[:-2], -1, 1)
    flat_max = ops.gather_rows(flat, dst)  # (..., E, 1): flat index v, as released
    divisor = (flat_max + norm_x).clamp_min(_TINY**2).sqrt()  # the floor only keeps 0-rows finite
    return alpha * scores / (att_norm * divisor + 1e-12)


def neighbourhood_max(per_edge: Tensor, graph: Graph) -> Tensor:
    """``max`` of a non-negative ``(E, H)`` edge quantity over each destination's incoming edges,
    gathered back to the edges (``(E, H)``).  Empty neighbourhoods never reach an edge."""
    per_node = segment_max(per_edge, graph.dst, graph.num_nodes).clamp_min(0.0)
    return gather_rows(per_node, graph.dst)


@register_norm("lipschitz", aliases=("lipschitznorm", "lipschitz_norm", "lip"))
class LipschitzNorm(ScoreRules):
    """LipschitzNorm plugin (a :class:`zoo.norms.scores.ScoreNorm` with a rule for every score kind).

    Args:
        alpha: the bound on every normalised score (paper: ``alpha = 1``; ``alpha = 0`` gives
            uniform attention).  The ``authors_code`` variants multiply their score by it too.
        variant: ``"paper"`` (Eqs. 15/17/19, default), ``"authors_code"`` or
            ``"authors_code_si"`` (the released code's GAT normalisation; module docstring).
    """

    name = "lipschitz"

    def __init__(self, alpha: float = 1.0, variant: str = "paper") -> None:
        if not alpha >= 0:
            raise ValueError(f"lipschitz: alpha must be >= 0 (the bound on |score|), got {alpha}")
        key = normalize_name(variant)
        if key not in VARIANTS:
            raise unknown_name_error("lipschitz variant", variant, VARIANTS)
        self.alpha, self.variant = float(alpha), key

    def __repr__(self) -> str:
        return f"LipschitzNorm(alpha={self.alpha}, variant={self.variant!r})"

    def _paper_only(self, score: str) -> None:
        if self.variant != "paper":
            raise ValueError(
                f"lipschitz variant {self.variant!r} reproduces the authors' GAT (v1) code; they released no "
                f"{score} normalisation of that form: use variant='paper' for this model"
            )

    # ---------------------------------------------------------------- additive (GAT v1): Eq. 17
    @score_rule(AdditiveScores)
    def _additive(self, s: AdditiveScores) -> Tensor:
        """Eq. 17 on ``a_s^T x_u + a_t^T x_v`` (pre-LeakyReLU) with ``x = s.nodes``."""
        if self.variant != "paper":
            return self._authors_code_additive(s)
        graph = s.graph
        query_norm = safe_norm(torch.cat([s.att_src, s.att_dst], dim=-1))  # (H,)
        # Under vmap the chain runs once on the replicas' physical tensors (on_replicas): ~a dozen small
        # ops a layer, each otherwise behind a vmap layer (the custom ops behind torch.library's Python).
        return on_replicas(_eq17, (s.scores, s.nodes, query_norm), graph.src, graph.dst, graph.num_nodes,
                           self.alpha)

    def _authors_code_additive(self, s: AdditiveScores) -> Tensor:
        """The released ``LipschitzNorm.forward`` (see the module docstring), same inputs."""
        graph = s.graph
        att = torch.cat([s.att_src, s.att_dst], dim=-1)  # (H, 2C)
        if self.variant == "authors_code":
            att_norm = (4.0 * att.pow(2).sum().sqrt()).reshape(1, 1)  # one norm over all heads
        else:
            att_norm = (4.0 * att.pow(2).sum(-1).sqrt()).reshape(1, -1)  # (1, H)
        # as Eq. 17's chain: under vmap once on the replicas' physical tensors (on_replicas)
        return on_replicas(_authors_rule, (s.scores, s.nodes, att_norm), graph.src, graph.dst, graph.num_nodes,
                           self.alpha)

    # ---------------------------------------------------------------- perceptron (GATv2): Eq. 15
    @score_rule(MLPScores)
    def _mlp(self, s: MLPScores) -> Tensor:
        r"""Perceptron scores ``g~(z_uv) = a^T LeakyReLU(z_uv)`` with ``z_uv = W_s h_u + W_t h_v [+ b]``
        (``s.hidden``, ``(E, H, C)``), normalised by Eq. 15 taking ``z`` as the attention input:

        .. math:: g_{uv} = \frac{\alpha\,\tilde g(z_{uv})}{\max\{\max_{u'}|\tilde g(z_{u'v})|,\;
                  L\,\max_{u'}\|z_{u'v}\|\}},\qquad L = \|a\|_2 \max(1, |\text{slope}|)

        ``L`` is the Lipschitz constant of ``z -> a^T LeakyReLU(z)`` (LeakyReLU is
        ``max(1, |slope|)``-Lipschitz, then Cauchy-Schwarz), so the second term bounds the
        first (``g~(0) = 0``): ``|g| <= alpha``.  Both are computed, as written in Eq. 15.
        ``W_s, W_t`` are again left to Theorem 1's ``||W_k||`` factor.
        """
        self._paper_only("perceptron (GATv2)")
        raw = s.raw()  # (E, H)
        lipschitz = safe_norm(s.att) * max(1.0, abs(s.negative_slope))  # (H,)
        score_bound = neighbourhood_max(raw.abs(), s.graph)
        input_bound = lipschitz * neighbourhood_max(safe_norm(s.hidden), s.graph)
        return self.alpha * raw / torch.maximum(score_bound, input_bound).clamp_min(_TINY)

    # ---------------------------------------------------------------- dot product: Eq. 19
    @score_rule(DotProductScores)
    def _dot_product(self, s: DotProductScores) -> Tensor:
        """Raw dot-product scores ``q_v^T k_u`` (``(E, H)``, unscaled) divided by
        ``max{uv, uw, vw}`` with ``u = ||q_v||`` (node ``v``'s attention has the single query
        ``q_v``), ``v = max_{u in N(v)} ||k_u||``, ``w = max_{u in N(v)} ||v_u||``.

        The authors' code takes ``u`` as the Frobenius norm of *all* queries, which grows like
        ``sqrt(N)`` and flattens attention on large graphs; the per-node ``u`` is Eq. 19 applied
        neighbour-wise, as §5 prescribes for graph attention, and still gives ``|g| <= alpha``.
        """
        self._paper_only("dot-product")
        graph = s.graph
        u = gather_rows(safe_norm(s.query), graph.dst)  # (E, H)
        v = neighbourhood_max(gather_rows(safe_norm(s.key), graph.src), graph)
        w = neighbourhood_max(gather_rows(safe_norm(s.value), graph.src), graph)
        bound = torch.maximum(torch.maximum(u * v, u * w), v * w)
        return self.alpha * s.scores / bound.clamp_min(_TINY)
