"""Attention scores as single operations with their own backward (GATv2 and GAT).

GATv2's score

.. math:: e_{uv,h} = \\sum_c a_{hc}\\, \\mathrm{LeakyReLU}(x^s_{u,hc} + x^t_{v,hc})

Written with autograd's elementwise ops this makes about ten passes over ``(E, heads,
channels)`` tensors per training step (two gathers, the add, LeakyReLU, the product with ``a``,
then LeakyReLU's backward, its recomputation for ``d a``, two products and the two scatters),
each one a fresh allocation.  :func:`gatv2_score` writes one such tensor in the forward (gather,
then gather + add, LeakyReLU, product and sum on it in place or on a reused buffer) and one in
the backward, using that LeakyReLU with a slope ``s >= 0`` keeps the sign, so its *output* ``y``
is all the backward needs:

* ``d a_hc = sum_e g_eh y_ehc`` (one contraction over the edges),
* ``d z_ehc = g_eh a_hc D_ehc`` with ``D = 1 if y > 0 else s`` (``leaky_relu_backward`` on the
  result, ``g`` broadcast, no ``(E, H, C)`` product with ``a``): ``a`` is constant over the
  edges, so it multiplies the ``(N, H, C)`` sums after the two scatter-adds instead.

Only ``y`` (one ``(E, H, C)`` tensor) is kept for the backward, as before.  On the CPU, large
edge tensors are processed in cache-sized blocks of edges.  GAT: :func:`gat_edge_scores` does the
same for ``LeakyReLU(s_u + t_v)`` on ``(E, heads)``.  Under ``torch.func.vmap`` the replica
dimension is folded into the heads (one call for all replicas, contiguous rows).  Plain torch ops
only: devices and dtypes follow the inputs.  When the layers use them is :mod:`zoo.ops.dispatch`'s
decision (switch: :mod:`zoo.ops.config`).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import fold as _fold
from zoo.ops._custom import is_batched as _is_batched
from zoo.ops._custom import shared_graph as _shared_graph
from zoo.ops._custom import unfold as _unfold
from zoo.ops._custom import vmap_without_rules as _vmap_without_rules
from zoo.ops.message import leaky_relu_dot
from zoo.ops.segment import gather_rows

#: On the CPU, an ``(E, H, C)`` tensor of more than CHUNK_MIN_BYTES is processed in blocks of
#: edges (forward: FORWARD_CHUNK_BYTES, about the L2 cache; backward: BACKWARD_CHUNK_BYTES), so
#: the in-place passes after the gather run in cache.  Cora, 15 replicas x 64 channels (51 MB):
#: forward 15.5 -> 9.8 ms, backward 17.1 -> 14.7 ms; unchunked is faster below a few MB.
CHUNK_MIN_BYTES = 16 << 20
FORWARD_CHUNK_BYTES = 1 << 20
BACKWARD_CHUNK_BYTES = 4 << 20


def _blocks(y: Tensor, chunk_bytes: int) -> Sequence[Tuple[int, int]]:
    """Edge ranges ``[a, b)`` covering ``y``'s rows: one on a GPU or when ``y`` is small."""
    e = y.size(0)
    row = max(1, y[:1].numel() * y.element_size())
    if y.device.type != "cpu" or e * row <= CHUNK_MIN_BYTES:
        return [(0, e)]
    step = max(1, chunk_bytes // row)
    return [(a, min(e, a + step)) for a in range(0, e, step)]


def _forward(x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, src: Tensor, dst: Tensor,
             slope: float) -> Tuple[Tensor, Tensor]:
    x_dst = x_src if x_dst is None else x_dst
    e = src.numel()
    y = x_src.new_empty((e,) + tuple(x_src.shape[1:]))
    scores = y.new_empty(y.shape[:-1])
    blocks = _blocks(y, FORWARD_CHUNK_BYTES)
    tmp = y.new_empty((max(b - a for a, b in blocks),) + tuple(y.shape[1:])) if e else y
    for a, b in blocks:  # y = LeakyReLU(x_src[src] + x_dst[dst]); scores = (y * att).sum(-1)
        part, buf = y[a:b], tmp[: b - a]
        torch.index_select(x_src, 0, src[a:b], out=part)
        part.add_(torch.index_select(x_dst, 0, dst[a:b], out=buf))
        F.leaky_relu_(part, slope)
        torch.sum(torch.mul(part, att, out=buf), -1, out=scores[a:b])
    return scores, y


def _backward(grad: Tensor, y: Tensor, att: Tensor, src: Tensor, dst: Tensor, num_nodes: int, slope: float,
              shared: bool) -> Tuple[Tensor, Optional[Tensor], Tensor]:
    shape = (num_nodes,) + tuple(y.shape[1:])
    grad_src = y.new_zeros(shape)
    grad_dst = grad_src if shared else y.new_zeros(shape)
    grad_att = att.new_zeros(att.shape)
    for a, b in _blocks(y, BACKWARD_CHUNK_BYTES):
        g, part = grad[a:b], y[a:b]
        grad_att.add_(torch.einsum("eh,ehc->hc", g, part))
        # g * LeakyReLU'(z), read from the result y (same sign as z since slope >= 0)
        g_rows = g.unsqueeze(-1).expand_as(part)
        if part.size(-1) < 32:  # few channels: the broadcasting kernel is slow (8 channels: 5.7 vs 1.1 ms)
            g_rows = g_rows.contiguous()
        t = torch.ops.aten.leaky_relu_backward(g_rows, part, slope, True)
        grad_src.index_add_(0, src[a:b], t)
        grad_dst.index_add_(0, dst[a:b], t)
    if shared:
        return grad_src.mul_(att), None, grad_att
    return grad_src.mul_(att), grad_dst.mul_(att), grad_att


class _GATv2Score(torch.autograd.Function):
    """Outside vmap: no custom op dispatch."""

    @staticmethod
    def forward(ctx: Any, x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, src: Tensor, dst: Tensor,
                slope: float) -> Tensor:
        scores, y = _forward(x_src, x_dst, att, src, dst, slope)
        ctx.save_for_backward(y, att, src, dst)
        ctx.num_nodes, ctx.slope, ctx.shared = x_src.size(0), slope, x_dst is None
        return scores

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        y, att, src, dst = ctx.saved_tensors
        grad_src, grad_dst, grad_att = _backward(grad.contiguous(), y, att, src, dst, ctx.num_nodes, ctx.slope,
                                                 ctx.shared)
        return grad_src, grad_dst, grad_att, None, None, None


if _HAS_CUSTOM_OPS:

    @_custom_op("zoo::gatv2_score")
    def _gatv2_score(x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, src: Tensor, dst: Tensor,
                     slope: float) -> Tuple[Tensor, Tensor]:
        return _forward(x_src, x_dst, att, src, dst, slope)


    @_gatv2_score.register_fake
    def _(x_src, x_dst, att, src, dst, slope):
        e = src.numel()
        return x_src.new_empty((e,) + tuple(x_src.shape[1:-1])), x_src.new_empty((e,) + tuple(x_src.shape[1:]))


    @_custom_op("zoo::gatv2_score_backward")
    def _gatv2_score_bwd(grad: Tensor, y: Tensor, att: Tensor, src: Tensor, dst: Tensor, num_nodes: int,
                         slope: float, shared: bool) -> Tuple[Tensor, Tensor, Tensor]:
        grad_src, grad_dst, grad_att = _backward(grad, y, att, src, dst, num_nodes, slope, shared)
        # (a custom op returns no optional tensors: "no x_dst" is an empty one)
        return grad_src, y.new_empty(0) if grad_dst is None else grad_dst, grad_att


    @_gatv2_score_bwd.register_fake
    def _(grad, y, att, src, dst, num_nodes, slope, shared):
        shape = (num_nodes,) + tuple(y.shape[1:])
        return y.new_empty(shape), y.new_empty(0 if shared else shape), att.new_empty(att.shape)


    def _setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor]) -> None:
        x_src, x_dst, att, src, dst, slope = inputs
        ctx.save_for_backward(output[1], att, src, dst)
        ctx.num_nodes, ctx.slope, ctx.shared = x_src.size(0), slope, x_dst is None


    def _grad(ctx: Any, grad: Optional[Tensor], grad_y: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        y, att, src, dst = ctx.saved_tensors  # y is internal: its gradient (grad_y) is never used
        if grad is None:
            return None, None, None, None, None, None
        grad_src, grad_dst, grad_att = _gatv2_score_bwd(grad.contiguous(), y, att, src, dst, ctx.num_nodes,
                                                        ctx.slope, ctx.shared)
        return grad_src, None if ctx.shared else grad_dst, grad_att, None, None, None


    _gatv2_score.register_autograd(_grad, setup_context=_setup)


    def _fwd_vmap(info: Any, in_dims: Sequence[Any], x_src: Tensor, x_dst: Optional[Tensor], att: Tensor,
                  src: Tensor, dst: Tensor, slope: float) -> Tuple[Tuple[Tensor, Tensor], Tuple[int, int]]:
        xs_dim, xd_dim, a_dim, src_dim, dst_dim, _ = in_dims
        _shared_graph(src_dim, [dst_dim])
        b = info.batch_size
        folded_dst = None if x_dst is None else _fold(x_dst, xd_dim, b).contiguous()
        att_b = att.movedim(a_dim, 0) if a_dim is not None else att.expand(b, *att.shape)
        scores, y = _gatv2_score(_fold(x_src, xs_dim, b).contiguous(), folded_dst, att_b.reshape(-1, att.shape[-1]),
                                 src, dst, slope)
        return (_unfold(scores, b), _unfold(y, b)), (1, 1)


    def _bwd_vmap(info: Any, in_dims: Sequence[Any], grad: Tensor, y: Tensor, att: Tensor, src: Tensor,
                  dst: Tensor, num_nodes: int, slope: float,
                  shared: bool) -> Tuple[Tuple[Tensor, Tensor, Tensor], Tuple[int, Optional[int], int]]:
        g_dim, y_dim, a_dim, src_dim, dst_dim, *_ = in_dims
        _shared_graph(src_dim, [dst_dim])
        b = info.batch_size
        att_b = att.movedim(a_dim, 0) if a_dim is not None else att.expand(b, *att.shape)
        grad_src, grad_dst, grad_att = _gatv2_score_bwd(
            _fold(grad, g_dim, b).contiguous(), _fold(y, y_dim, b), att_b.reshape(-1, att.shape[-1]), src, dst,
            num_nodes, slope, shared)
        grad_att = grad_att.view(b, *att.shape[-2:])
        if shared:
            return (_unfold(grad_src, b), grad_dst, grad_att), (1, None, 0)
        return (_unfold(grad_src, b), _unfold(grad_dst, b), grad_att), (1, 1, 0)


    torch.library.register_vmap("zoo::gatv2_score", _fwd_vmap)
    torch.library.register_vmap("zoo::gatv2_score_backward", _bwd_vmap)


# --------------------------------------------------------------------------- GAT's edge scores


def _gat_forward(score_src: Tensor, score_dst: Tensor, src: Tensor, dst: Tensor, slope: float) -> Tensor:
    e = score_src.index_select(0, src)
    e.add_(score_dst.index_select(0, dst))
    return F.leaky_relu_(e, slope)


def _gat_backward(grad: Tensor, e: Tensor, src: Tensor, dst: Tensor, num_nodes: int,
                  slope: float) -> Tuple[Tensor, Tensor]:
    t = torch.ops.aten.leaky_relu_backward(grad, e, slope, True)  # from the result: slope >= 0
    shape = (num_nodes,) + tuple(e.shape[1:])
    return e.new_zeros(shape).index_add_(0, src, t), e.new_zeros(shape).index_add_(0, dst, t)


class _GATEdgeScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, score_src: Tensor, score_dst: Tensor, src: Tensor, dst: Tensor, slope: float) -> Tensor:
        e = _gat_forward(score_src, score_dst, src, dst, slope)
        ctx.save_for_backward(e, src, dst)
        ctx.num_nodes, ctx.slope = score_src.size(0), slope
        return e

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        e, src, dst = ctx.saved_tensors
        return _gat_backward(grad.contiguous(), e, src, dst, ctx.num_nodes, ctx.slope) + (None, None, None)


if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::gat_edge_scores")
    def _gat_edge_scores(score_src: Tensor, score_dst: Tensor, src: Tensor, dst: Tensor, slope: float) -> Tensor:
        return _gat_forward(score_src, score_dst, src, dst, slope)


    @_gat_edge_scores.register_fake
    def _(score_src, score_dst, src, dst, slope):
        return score_src.new_empty((src.numel(),) + tuple(score_src.shape[1:]))


    @_custom_op("zoo::gat_edge_scores_backward")
    def _gat_edge_scores_bwd(grad: Tensor, e: Tensor, src: Tensor, dst: Tensor, num_nodes: int,
                             slope: float) -> Tuple[Tensor, Tensor]:
        return _gat_backward(grad, e, src, dst, num_nodes, slope)


    @_gat_edge_scores_bwd.register_fake
    def _(grad, e, src, dst, num_nodes, slope):
        shape = (num_nodes,) + tuple(e.shape[1:])
        return e.new_empty(shape), e.new_empty(shape)


    def _gat_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        score_src, _, src, dst, slope = inputs
        ctx.save_for_backward(output, src, dst)
        ctx.num_nodes, ctx.slope = score_src.size(0), slope


    def _gat_grad(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        e, src, dst = ctx.saved_tensors
        return _gat_edge_scores_bwd(grad.contiguous(), e, src, dst, ctx.num_nodes, ctx.slope) + (None, None, None)


    _gat_edge_scores.register_autograd(_gat_grad, setup_context=_gat_setup)


    def _gat_fwd_vmap(info: Any, in_dims: Sequence[Any], score_src: Tensor, score_dst: Tensor, src: Tensor,
                      dst: Tensor, slope: float) -> Tuple[Tensor, int]:
        s_dim, d_dim, src_dim, dst_dim, _ = in_dims
        _shared_graph(src_dim, [dst_dim])
        b = info.batch_size
        e = _gat_edge_scores(_fold(score_src, s_dim, b).contiguous(), _fold(score_dst, d_dim, b).contiguous(),
                             src, dst, slope)
        return _unfold(e, b), 1


    def _gat_bwd_vmap(info: Any, in_dims: Sequence[Any], grad: Tensor, e: Tensor, src: Tensor, dst: Tensor,
                      num_nodes: int, slope: float) -> Tuple[Tuple[Tensor, Tensor], Tuple[int, int]]:
        g_dim, e_dim, src_dim, dst_dim, _, _ = in_dims
        _shared_graph(src_dim, [dst_dim])
        b = info.batch_size
        grad_src, grad_dst = _gat_edge_scores_bwd(_fold(grad, g_dim, b).contiguous(), _fold(e, e_dim, b), src, dst,
                                                  num_nodes, slope)
        return (_unfold(grad_src, b), _unfold(grad_dst, b)), (1, 1)


    torch.library.register_vmap("zoo::gat_edge_scores", _gat_fwd_vmap)
    torch.library.register_vmap("zoo::gat_edge_scores_backward", _gat_bwd_vmap)


def gat_edge_scores(score_src: Tensor, score_dst: Tensor, src: Tensor, dst: Tensor, negative_slope: float) -> Tensor:
    """GAT's edge scores ``LeakyReLU(score_src[u] + score_dst[v])`` for every edge ``u -> v``.

    Equals ``F.leaky_relu(gather_rows(score_src, src) + gather_rows(score_dst, dst), s)`` with one
    buffer written in the forward (gather, gather + add and LeakyReLU in place) and only the
    result kept for the backward (``negative_slope >= 0``).  Under vmap the replicas fold into the
    heads: contiguous rows, and the scores come out in the layout the fused aggregation uses.

    Shapes: score_src, score_dst ``(N, H)``; src, dst ``(E,)`` -> ``(E, H)``.
    """
    if negative_slope < 0:
        raise ValueError(f"gat_edge_scores needs negative_slope >= 0 (got {negative_slope}); use the plain ops")
    if _vmap_without_rules(score_src, score_dst):  # torch < 2.4 under vmap: vmappable plain ops
        return F.leaky_relu(gather_rows(score_src, src) + gather_rows(score_dst, dst), negative_slope)
    if _is_batched(score_src) or _is_batched(score_dst):
        return _gat_edge_scores(score_src, score_dst, src, dst, float(negative_slope))
    return _GATEdgeScores.apply(score_src, score_dst, src, dst, float(negative_slope))

def gatv2_score(x_src: Tensor, x_dst: Optional[Tensor], att: Tensor, src: Tensor, dst: Tensor,
                negative_slope: float) -> Tensor:
    r"""``e_{uv,h} = a_h^T LeakyReLU(x_src[u, h] + x_dst[v, h])`` for every edge ``u -> v``.

    Equals ``leaky_relu_dot(gather_rows(x_src, src) + gather_rows(x_dst, dst), att, s)`` (to
    rounding) with fewer passes over ``(E, H, C)`` tensors; ``x_dst=None`` means ``x_dst is x_src``
    (GATv2's shared weights: one gradient, both scatters into one buffer).  Needs
    ``negative_slope >= 0`` (the backward reads LeakyReLU's sign from its output).

    Shapes: x_src, x_dst ``(N, H, C)``; att ``(H, C)``; src, dst ``(E,)`` -> ``(E, H)``.
    """
    if negative_slope < 0:
        raise ValueError(f"gatv2_score needs negative_slope >= 0 (got {negative_slope}); use the plain ops")
    if _vmap_without_rules(x_src, x_dst, att):  # torch < 2.4 under vmap: vmappable plain ops
        hidden = gather_rows(x_src, src) + gather_rows(x_src if x_dst is None else x_dst, dst)
        return leaky_relu_dot(hidden, att, negative_slope)
    if any(t is not None and _is_batched(t) for t in (x_src, x_dst, att)):
        return _gatv2_score(x_src, x_dst, att, src, dst, float(negative_slope))[0]
    return _GATv2Score.apply(x_src, x_dst, att, src, dst, float(negative_slope))


__all__ = ["gat_edge_scores", "gatv2_score"]
