"""The one place that decides between the fused edge kernels and the plain autograd ops.

The layers state their equation and call these entry points; which kernel computes it is
decided here, from the switch (:func:`zoo.ops.config.use_fused`, read once per call), the size
of the edge tensors and whether attention dropout is active.  Each kernel equals the plain ops to
rounding (same dropout masks included); the per-family rules below are each measured
(docs/notes/performance.md), and unifying them would be a separate, measured change:

* GAT's score (:func:`gat_scores`): the ``"score"`` kernel whenever switched on — node terms as
  one matrix product, edge scores as one op (the latter only without an extra score term or
  score normalisation, with ``negative_slope >= 0``); no size threshold, no dropout rule.
* GATv2's score (:func:`gatv2_scores`): the ``"score"`` kernel for the plain
  ``a^T LeakyReLU(W_s h_u + W_t h_v)`` (no edge term or score normalisation, ``negative_slope >= 0``;
  an attention bias joins the target rows first, :func:`fold_node_terms`), for one replica only
  from ``min_elements`` edge x head x channel
  elements (under vmap always).  Attention dropout acts on ``alpha``, after the score, so it does
  not keep the score plain; while it is active the size rule applies under vmap too, as for the
  aggregation, so both steps of a tiny graph's replicas stay plain stacked or alone.
* Aggregation (:func:`attention`): the ``"aggregate"`` kernel, for one replica only from
  ``min_elements`` elements (under vmap always).  While attention dropout is active the kernel
  takes the mask (drawn as the plain path draws it: :func:`zoo.ops.dropout.dropout_mask`) and
  the size rule applies under vmap too, so a tiny graph's replicas keep the plain ops stacked or
  alone (their numbers bitwise those of a replica trained alone).
* Score and aggregation together (:func:`gat_attention`, :func:`gatv2_attention`, what the layers
  call): the *compiled* op (:mod:`zoo.ops._compiled`: C++ on the CPU, Triton on CUDA) when both
  kernels and ``compiled`` are on, the score is the family's plain one (GAT: with or without an edge
  term, and with a score norm, whose normalised scores enter as the op's edge term with zero node
  terms; GATv2: no edge term or score norm), a backend serves the device and attention
  dropout is inactive or the backend applies its mask (the C++ op: the mask drawn where the plain
  path draws it, :func:`zoo.ops.dropout.dropout_mask`; every replica's arithmetic is its own, so a
  replica's numbers are those it gets alone) — at every size: it beats the plain ops at one replica
  even on the smallest suite graphs, so no size threshold applies to it (figures:
  docs/notes/performance.md, "Dispatch thresholds").  Otherwise the two steps above.
* Softmax and aggregation of scores computed elsewhere (:func:`softmax_aggregate`: dot-product
  attention, SAN and the graph transformers): the compiled GAT op with the scores as its edge term
  and zero node terms (``LeakyReLU`` of slope 1 is the identity: the scores pass exactly) where it
  serves, with attention dropout's mask inside as above; otherwise :func:`attention`.
* Under ``torch.autocast`` (``precision = "bf16"``) every entry point here computes in float32
  (:func:`zoo.ops.precision.float32_under_autocast`), so each kernel sees one dtype and the rules
  above apply unchanged; the layers' projections around them run in bfloat16.
* Without custom ops (torch < 2.4, :func:`zoo.ops._custom.vmap_without_rules`) no fused kernel
  runs under vmap: their autograd.Functions have no vmap rule there; the plain ops are vmapped.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.ops._compiled import ops as compiled
from zoo.ops._custom import custom_ops_active, is_batched, vmap_without_rules
from zoo.ops.aggregate import edge_attention, graph_orders
from zoo.ops.bounds import edge_sum
from zoo.ops.config import FusedConfig, use_fused
from zoo.ops.dropout import dropout, dropout_mask
from zoo.ops.message import leaky_relu_dot, node_scores, weight_messages
from zoo.ops.precision import float32_under_autocast
from zoo.ops.score import gat_edge_scores, gatv2_score
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum

#: ``scores -> scores``: a score normalisation applied before the nonlinearity (GAT) or
#: ``hidden -> scores`` computing the score from the pre-activation (GATv2).
ScoreHook = Callable[[Tensor], Tensor]


def dropout_active(attn_dropout: float, training: bool) -> bool:
    """Attention dropout draws a mask in this call (only the C++ compiled op takes it inside).

    While it does, the fused kernels follow the size rule under vmap too: a replica's numbers are
    then bitwise those of the same replica trained alone, where a tiny graph takes the plain path
    (tests/trainer/test_train.py::test_dropout_replica_depends_only_on_its_seed)."""
    return training and float(attn_dropout) > 0.0


def large_enough(num_edges: int, values: Tensor, config: Optional[FusedConfig] = None, dropping: bool = False) -> bool:
    """Whether ``num_edges`` edges over ``(N, H, C)`` ``values`` pay for a fused kernel: always under
    vmap (stacked replicas), else from ``config.min_elements`` ``E * H * C`` elements.  While attention
    dropout is ``dropping`` the size alone decides, stacked or not, so a replica's numbers stay those
    it gets alone."""
    config = use_fused() if config is None else config
    big = num_edges * math.prod(values.shape[1:]) >= config.min_elements
    return big or (not dropping and is_batched(values))


def fuses_aggregation(num_edges: int, values: Tensor, dropping: bool, config: Optional[FusedConfig] = None) -> bool:
    """The aggregation's rule: the ``"aggregate"`` kernel is on and the edge tensor is :func:`large_enough`."""
    config = use_fused() if config is None else config
    return config.aggregate and large_enough(num_edges, values, config, dropping)


def fuses_gatv2_score(num_edges: int, x_src: Tensor, config: Optional[FusedConfig] = None,
                      dropping: bool = False) -> bool:
    """GATv2's rule: the ``"score"`` kernel is on and the edge tensor is :func:`large_enough` (the
    aggregation's rule)."""
    config = use_fused() if config is None else config
    return config.score and large_enough(num_edges, x_src, config, dropping)


@float32_under_autocast
def gat_scores(x: Tensor, att_src: Tensor, att_dst: Tensor, graph: object, negative_slope: float, *,
               bias: Optional[Tensor] = None, normalize: Optional[ScoreHook] = None) -> Tensor:
    r"""GAT's edge scores :math:`e_{uv} = \mathrm{LeakyReLU}(a_s^\top x_u + a_t^\top x_v\,[+\,b_{uv}])`.

    ``normalize`` (a score norm) maps the summed terms before ``bias`` and the LeakyReLU.

    Shapes: x ``(N, H, C)``; att_src, att_dst ``(H, C)``; bias ``(E, H)`` -> ``(E, H)``.
    """
    config = use_fused()
    src, dst = graph.src, graph.dst
    # Scores are computed per node and gathered per edge: O(N) dot products, not O(E).
    if config.score:  # one matrix product for both terms (and its backward: two)
        score_src, score_dst = node_scores(x, att_src, att_dst)
    else:
        score_src, score_dst = (x * att_src).sum(-1), (x * att_dst).sum(-1)
    if (config.score and bias is None and normalize is None and negative_slope >= 0
            and not vmap_without_rules(score_src, score_dst)):
        return gat_edge_scores(score_src, score_dst, src, dst, negative_slope)  # one (E, H) buffer
    scores = gather_rows(score_src, src) + gather_rows(score_dst, dst)
    if normalize is not None:
        scores = normalize(scores)
    if bias is not None:
        scores = scores + bias
    return F.leaky_relu(scores, negative_slope)


def fold_node_terms(x_src: Tensor, x_dst: Optional[Tensor],
                    terms: Sequence[Tensor]) -> Tuple[Optional[Tensor], Tuple[Tensor, ...]]:
    r"""GATv2's pre-activation terms without an edge dimension (the attention bias ``b``, ``(H, C)``)
    added to the target rows: :math:`x^s_u + x^t_v + b = x^s_u + (x^t_v + b)`.  Returns the target
    rows and the edge terms left.  Why: one ``(N, H, C)`` add instead of an ``(E, H, C)`` one, and the
    score keeps the plain form that the fused and compiled kernels take."""
    node = [t for t in terms if t.dim() < x_src.dim()]  # logical dims: the same under vmap
    if not node:
        return x_dst, tuple(terms)
    target = x_src if x_dst is None else x_dst
    for term in node:
        target = target + term
    return target, tuple(t for t in terms if t.dim() >= x_src.dim())


@float32_under_autocast
def gatv2_scores(x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, graph: object, negative_slope: float, *,
                 terms: Sequence[Tensor] = (), score: Optional[ScoreHook] = None, attn_dropout: float = 0.0,
                 training: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
    r"""GATv2's edge scores :math:`e_{uv} = a^\top \mathrm{LeakyReLU}(x^s_u + x^t_v\,[+\,t_{uv} \ldots])`.

    ``x_dst=None``: shared weights (``x_dst is x_src``).  ``terms`` are added to the pre-activation
    in order (edge term ``(E, H, C)``, attention bias ``(H, C)``); ``score`` replaces
    ``a^T LeakyReLU(.)`` on the pre-activation (a score norm).  Returns the scores ``(E, H)`` and,
    from the plain path, the gathered source rows ``x_src[src]`` (``(E, H, C)``, for the messages;
    ``None`` from the fused kernel).
    """
    config = use_fused()
    src, dst = graph.src, graph.dst
    x_dst, terms = fold_node_terms(x_src, x_dst, terms)
    fusable = not terms and score is None and negative_slope >= 0 and not vmap_without_rules(x_src, x_dst, att)
    dropping = dropout_active(attn_dropout, training)
    if fusable and fuses_gatv2_score(graph.num_edges, x_src, config, dropping):
        return gatv2_score(x_src, x_dst, att, src, dst, negative_slope), None  # fewer (E, H, C) passes
    src_rows = gather_rows(x_src, src)  # gathered once: used by the score and the message
    hidden = src_rows + gather_rows(x_src if x_dst is None else x_dst, dst)
    for term in terms:
        hidden = hidden + term
    if score is not None:
        return score(hidden), src_rows
    return leaky_relu_dot(hidden, att, negative_slope), src_rows  # keeps hidden only


@float32_under_autocast
def attention(scores: Tensor, values: Tensor, graph: object, *, attn_dropout: float = 0.0, training: bool = False,
              source_rows: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r""":math:`\alpha_{uv} = \operatorname{softmax}_{u \in \mathcal N(v)} e_{uv}` (dropout on
    :math:`\alpha` while training), :math:`h'_v = \sum_{u \in \mathcal N(v)} \alpha_{uv} x_u`.

    ``source_rows``: ``values[src]`` if the caller has it already (saves a gather on the plain path).

    Shapes: scores ``(E, H)``; values ``(N, H, C)`` -> out ``(N, H, C)``, alpha ``(E, H)``.
    """
    n, src, dst = graph.num_nodes, graph.src, graph.dst
    dropping = dropout_active(attn_dropout, training)
    if not vmap_without_rules(scores, values) and fuses_aggregation(graph.num_edges, values, dropping):
        keep = dropout_mask(scores, attn_dropout) if dropping else None  # alpha's shape: the plain path's draw
        return edge_attention(scores, values, src, dst, n, graph_orders(graph), keep)  # no (E, H, C) tensors
    alpha = segment_softmax(scores, dst, n)
    weights = dropout(alpha, attn_dropout, training)
    rows = gather_rows(values, src) if source_rows is None else source_rows
    return segment_sum(weight_messages(weights, rows), dst, n), alpha


def compiled_serves(values: Tensor, attn_dropout: float = 0.0, training: bool = False,
                    config: Optional[FusedConfig] = None) -> bool:
    """Whether the compiled attention computes a layer's attention over ``values`` (``(N, H, C)``)."""
    config = use_fused() if config is None else config
    # The compiled ops' autograd / fake / vmap rules are torch.library registrations (torch >= 2.4).
    if not (config.use_compiled and custom_ops_active() and values.dtype in (torch.float32, torch.float64)
            and compiled.available(values.device)):
        return False
    return not dropout_active(attn_dropout, training) or compiled.takes_keep(values.device)


def compiled_keep(values: Tensor, graph: object, heads: int, attn_dropout: float, training: bool) -> Optional[Tensor]:
    """Attention dropout's scaled keep mask ``(E, H)`` for the compiled op, or ``None`` when inactive:
    drawn from the stream and at the point the plain path draws it (after the scores, which draw
    nothing), so switching the kernel drops the same edges."""
    if not dropout_active(attn_dropout, training):
        return None
    return dropout_mask(values.new_empty((graph.num_edges, heads)), attn_dropout)


def _normalized_edge_term(score_src: Tensor, score_dst: Tensor, graph: object, normalize: ScoreHook,
                          bias: Optional[Tensor]) -> Tensor:
    """GAT's score before its LeakyReLU with a score norm, as :func:`gat_scores` computes it: the node
    terms summed per edge, normalised, then ``bias`` added (``(E, H)``)."""
    scores = normalize(edge_sum(score_src, score_dst, graph.src, graph.dst))
    return scores if bias is None else scores + bias


@float32_under_autocast
def gat_attention(x: Tensor, att_src: Tensor, att_dst: Tensor, graph: object, negative_slope: float, *,
                  bias: Optional[Tensor] = None, normalize: Optional[ScoreHook] = None, attn_dropout: float = 0.0,
                  training: bool = False) -> Tuple[Tensor, Tensor]:
    r"""GAT's attention: :func:`gat_scores`, then :func:`attention` over ``x`` — or both in the compiled op.

    Shapes: x ``(N, H, C)``; att_src, att_dst ``(H, C)``; bias ``(E, H)`` -> out ``(N, H, C)``,
    alpha ``(E, H)``.
    """
    if compiled_serves(x, attn_dropout, training):
        score_src, score_dst = node_scores(x, att_src, att_dst)
        if normalize is not None:
            # A score norm maps the summed terms (as gat_scores does), and the result enters the op as its
            # edge term with zero node terms: LeakyReLU(0 + 0 + s) is the plain path's LeakyReLU(s) exactly.
            bias = _normalized_edge_term(score_src, score_dst, graph, normalize, bias)
            score_src = score_dst = x.new_zeros(score_src.shape)
        keep = compiled_keep(x, graph, x.shape[-2], attn_dropout, training)
        return compiled.gat_attention(score_src, score_dst, bias, x, negative_slope, compiled.graph_arguments_of(graph),
                                      keep)
    scores = gat_scores(x, att_src, att_dst, graph, negative_slope, bias=bias, normalize=normalize)
    return attention(scores, x, graph, attn_dropout=attn_dropout, training=training)


@float32_under_autocast
def softmax_aggregate(scores: Tensor, values: Tensor, graph: object, *, attn_dropout: float = 0.0,
                      training: bool = False) -> Tuple[Tensor, Tensor]:
    r""":math:`\alpha_{uv} = \operatorname{softmax}_{u \in \mathcal N(v)} s_{uv}` of given scores
    (dropout on :math:`\alpha` while training), :math:`h'_v = \sum_u \alpha_{uv} x_u`: :func:`attention`,
    or the compiled GAT op computing :math:`\mathrm{LeakyReLU}_1(0 + 0 + s_{uv}) = s_{uv}`.

    Shapes: scores ``(E, H)``; values ``(N, H, C)`` -> out ``(N, H, C)``, alpha ``(E, H)``.
    """
    if compiled_serves(values, attn_dropout, training):
        zero = values.new_zeros(values.shape[:-1])  # (N, H): no node terms
        keep = compiled_keep(values, graph, values.shape[-2], attn_dropout, training)
        return compiled.gat_attention(zero, zero, scores, values, 1.0, compiled.graph_arguments_of(graph), keep)
    return attention(scores, values, graph, attn_dropout=attn_dropout, training=training)


@float32_under_autocast
def gatv2_attention(x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, graph: object, negative_slope: float, *,
                    values: Optional[Tensor] = None, terms: Sequence[Tensor] = (), score: Optional[ScoreHook] = None,
                    attn_dropout: float = 0.0, training: bool = False) -> Tuple[Tensor, Tensor]:
    r"""GATv2's attention: :func:`gatv2_scores`, then :func:`attention` over ``values`` (default
    ``x_src``) — or both in the compiled op.  Arguments as :func:`gatv2_scores`.

    Shapes: x_src, x_dst, values ``(N, H, C)``; att ``(H, C)`` -> out ``(N, H, C)``, alpha ``(E, H)``.
    """
    messages = x_src if values is None else values
    x_dst, terms = fold_node_terms(x_src, x_dst, terms)
    if not terms and score is None and compiled_serves(messages, attn_dropout, training):
        keep = compiled_keep(messages, graph, messages.shape[-2], attn_dropout, training)
        return compiled.gatv2_attention(x_src, x_src if x_dst is None else x_dst, messages, att, negative_slope,
                                        compiled.graph_arguments_of(graph), keep)
    scores, src_rows = gatv2_scores(x_src, x_dst, att, graph, negative_slope, terms=terms, score=score,
                                    attn_dropout=attn_dropout, training=training)
    return attention(scores, messages, graph, attn_dropout=attn_dropout, training=training,
                     source_rows=src_rows if values is None else None)


__all__ = ["attention", "compiled_keep", "compiled_serves", "dropout_active", "fold_node_terms", "fuses_aggregation", "fuses_gatv2_score",
           "gat_attention", "gat_scores", "gatv2_attention", "gatv2_scores", "large_enough", "softmax_aggregate"]
