"""Fused edge softmax + weighted aggregation as sparse-matrix products.

The attention layers spend most of their time in passes over ``(E, heads, channels)`` edge
tensors: gather the source rows, multiply by ``alpha``, scatter-add into the destinations, and
the same again (plus a multiply-and-sum for ``d alpha``) in the backward.  :func:`edge_attention`
computes

.. math:: \\alpha_{uv} = \\operatorname{softmax}_{u \\in \\mathcal N(v)} e_{uv}, \\qquad
          h'_v = \\sum_{u \\in \\mathcal N(v)} \\alpha_{uv}\\, x_u

with no ``(E, heads, channels)`` tensor at all: each head's ``alpha`` is the value array of a
CSR matrix ``A_h`` (rows = destinations, columns = sources; all heads interleaved in one
``(N*heads, N*heads)`` matrix, so ``(N, heads, C)`` features are used as ``(N*heads, C)`` views), the forward is ``A_h @ X_h`` (``torch.sparse.mm``), the backward recomputes nothing
edge-sized either: ``dX_h = A_h^T @ dH_h`` and ``d alpha = (dH_h X_h^T)`` sampled at the edges
(``torch.sparse.sampled_addmm``), then the softmax Jacobian on ``(E, heads)``.  Under
``torch.func.vmap`` the replica dimension is folded into the heads (one call for all replicas).
Plain torch ops only: devices and dtypes follow the inputs.  When the layers use it is
:mod:`zoo.ops.dispatch`'s decision (switch: :mod:`zoo.ops.config`).
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import fold as _fold
from zoo.ops._custom import is_batched as _is_batched
from zoo.ops._custom import quiet_sparse as _quiet
from zoo.ops._custom import shared_graph as _shared_graph
from zoo.ops._custom import unfold as _unfold
from zoo.ops._custom import vmap_without_rules as _vmap_without_rules
from zoo.ops.message import weight_messages
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum



def _order(rows: Tensor, cols: Tensor, n: int) -> Tuple[Tensor, Tensor, Tensor]:
    """Edge permutation sorting by ``rows``, the CSR row pointer (``(n + 1,)``) and sorted columns."""
    perm = torch.argsort(rows, stable=True)
    crow = torch.zeros(n + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.bincount(rows, minlength=n).cumsum(0)
    return perm, crow, cols.index_select(0, perm)


def edge_orders(src: Tensor, dst: Tensor, num_nodes: int) -> Orders:
    """The graph's two CSR layouts, ``(perm, crow, col)`` with rows = destinations, then with
    rows = sources (the transpose, for the backward)."""
    return _order(dst, src, num_nodes) + _order(src, dst, num_nodes)


def graph_orders(graph: Any) -> Orders:
    """:func:`edge_orders` of a :class:`zoo.graph.Graph`, computed once per graph and device."""
    return graph.cached("edge_attention_orders", lambda: edge_orders(graph.src, graph.dst, graph.num_nodes))


def _csr(crow: Tensor, col: Tensor, values: Tensor, size: Tuple[int, ...]) -> Tensor:
    with _quiet():
        return torch.sparse_csr_tensor(crow, col, values, size, check_invariants=False)


_LAYOUTS: Dict[Tuple[int, int], Tuple[Any, Tuple[Tensor, Tensor, Tensor, Tensor]]] = {}


def _block_layout(crow: Tensor, col: Tensor, heads: int) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """All heads' matrices as one ``(N*H, N*H)`` CSR whose row/column ``v*H + h`` is node ``v``,
    head ``h`` — the layout of an ``(N, H, C)`` tensor viewed as ``(N*H, C)``, so no copies.

    Returns ``crow_b``, ``col_b``, ``pos`` (``(E*H,)``: where value ``(j, h)`` of the sorted
    ``(E, H)`` values lands) and its inverse ``take`` (CSR values = ``values.flatten()[take]``).
    Cached per ``crow`` tensor (the graph's, kept by its cache) and ``heads``.
    """
    key = (id(crow), heads)
    hit = _LAYOUTS.get(key)
    if hit is not None and hit[0]() is crow:
        return hit[1]
    n, e = crow.numel() - 1, col.numel()
    deg = crow[1:] - crow[:-1]
    node = torch.repeat_interleave(torch.arange(n, device=col.device), deg, output_size=e)
    hs = torch.arange(heads, device=col.device)
    pos = ((crow[:-1].index_select(0, node) * (heads - 1) + torch.arange(e, device=col.device)).unsqueeze(1)
           + hs * deg.index_select(0, node).unsqueeze(1)).reshape(-1)
    crow_b = torch.cat([((heads * crow[:-1]).unsqueeze(1) + hs * deg.unsqueeze(1)).reshape(-1),
                        crow.new_tensor([heads * e])])
    take = torch.empty_like(pos)
    take[pos] = torch.arange(pos.numel(), device=col.device)
    col_b = (col.unsqueeze(1) * heads + hs).reshape(-1).index_select(0, take)
    layout = (crow_b, col_b, pos, take)
    try:
        ref = weakref.ref(crow)
    except TypeError:
        return layout
    if hit is None:
        weakref.finalize(crow, _LAYOUTS.pop, key, None)
    _LAYOUTS[key] = (ref, layout)
    return layout


def _block_spmm(crow: Tensor, col: Tensor, values: Tensor, x: Tensor) -> Tensor:
    """Per head ``h``: ``A_h @ x[:, h]`` with ``A_h`` the CSR ``(crow, col, values[:, h])``.

    Shapes: crow ``(N + 1,)``, col ``(E,)``, values ``(E, H)``, x ``(N, H, C)`` -> ``(N, H, C)``.
    """
    n, h, c = x.shape
    crow_b, col_b, _, take = _block_layout(crow, col, h)
    flat = values.reshape(-1).index_select(0, take)
    return sparse_dense_mm(_csr(crow_b, col_b, flat, (n * h, n * h)), x.reshape(n * h, c)).view(n, h, c)


def sparse_dense_mm(a: Tensor, b: Tensor) -> Tensor:
    """``torch.sparse.mm(a, b)`` for a CSR ``a``: on the CPU with MKL, the same MKL product written
    straight into a fresh output.

    Why: ``torch.sparse.mm`` zero-fills a result, then MKL's product (``beta = 0``) goes to another
    buffer that is copied into it — two passes over the ``(rows, C)`` output more, a third of the
    product's time on the attention's block matrices.  ``addmm`` into an uninitialised ``out`` with
    ``beta = 0`` calls the same MKL routine, which reads nothing of ``out`` at ``beta = 0``; the bits
    are those of ``torch.sparse.mm`` (tests/ops/test_aggregate.py).  Elsewhere (no MKL, other
    devices) ``torch.sparse.mm``: another backend may scale ``out`` by ``beta``, and ``0 * NaN`` is NaN.
    """
    with _quiet():
        if a.device.type != "cpu" or not torch.backends.mkl.is_available():
            return torch.sparse.mm(a, b)
        b = b.contiguous()
        out = b.new_empty((a.shape[0], b.shape[1]))
        return torch.addmm(out, a, b, beta=0.0, alpha=1.0, out=out)


def _weights(alpha: Tensor, keep: Optional[Tensor]) -> Tensor:
    """The aggregation's weights: ``alpha``, dropped by the scaled keep mask ``keep`` if given."""
    return alpha if keep is None else alpha * keep


def _forward(scores: Tensor, x: Tensor, dst: Tensor, orders: Sequence[Tensor], num_nodes: int,
             keep: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    alpha = segment_softmax(scores, dst, num_nodes)
    perm, crow, col = orders[:3]
    return _block_spmm(crow, col, _weights(alpha, keep).index_select(0, perm), x), alpha


def _backward(grad_out: Tensor, grad_alpha: Optional[Tensor], alpha: Tensor, x: Tensor, dst: Tensor,
              orders: Sequence[Tensor], keep: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    n, h, c = x.shape
    perm, crow, col, perm_s, crow_s, col_s = orders
    # dX = W^T dH: the same matrices with rows = sources (W = alpha, dropped)
    grad_x = _block_spmm(crow_s, col_s, _weights(alpha, keep).index_select(0, perm_s), grad_out)
    # d alpha_e = <dH_dst(e), X_src(e)>: dH X^T sampled at the edges (same block layout)
    crow_b, col_b, pos, _ = _block_layout(crow, col, h)
    pattern = _csr(crow_b, col_b, alpha.new_zeros(col_b.numel()), (n * h, n * h))
    with _quiet():
        sampled = torch.sparse.sampled_addmm(pattern, grad_out.reshape(n * h, c), x.reshape(n * h, c).t(), beta=0.0)
    g = torch.empty_like(alpha).index_copy_(0, perm, sampled.values().index_select(0, pos).view(-1, h))
    if keep is not None:  # d W / d alpha = keep
        g = g * keep
    if grad_alpha is not None:
        g = g + grad_alpha
    # softmax Jacobian: d e_k = alpha_k (g_k - sum_{e into dst(k)} alpha_e g_e)
    weighted = alpha * g
    total = weighted.new_zeros((n,) + tuple(alpha.shape[1:])).index_add_(0, dst, weighted)
    return weighted - alpha * total.index_select(0, dst), grad_x


class _EdgeAttention(torch.autograd.Function):
    """Outside vmap: the same forward and backward without a custom op's dispatch cost."""

    @staticmethod
    def forward(ctx: Any, scores: Tensor, x: Tensor, dst: Tensor, num_nodes: int, keep: Optional[Tensor],
                *orders: Tensor) -> Tuple[Tensor, Tensor]:
        out, alpha = _forward(scores, x, dst, orders, num_nodes, keep)
        ctx.has_keep = keep is not None
        # nothing edge x channel is kept
        ctx.save_for_backward(alpha, x, dst, *((keep,) if ctx.has_keep else ()), *orders)
        return out, alpha

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor, grad_alpha: Tensor) -> Tuple[Optional[Tensor], ...]:
        alpha, x, dst, *rest = ctx.saved_tensors
        keep, orders = (rest[0], rest[1:]) if ctx.has_keep else (None, rest)
        grad_scores, grad_x = _backward(grad_out.contiguous(), grad_alpha, alpha, x, dst, orders, keep)
        return (grad_scores, grad_x, None, None, None) + (None,) * len(orders)


if _HAS_CUSTOM_OPS:
    # Under vmap: custom ops whose vmap rules fold the replica dimension into the heads.
    @_custom_op("zoo::edge_attention")
    def _edge_attention(scores: Tensor, x: Tensor, dst: Tensor, orders: List[Tensor], num_nodes: int,
                        keep: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        return _forward(scores, x, dst, orders, num_nodes, keep)


    @_edge_attention.register_fake
    def _(scores, x, dst, orders, num_nodes, keep):
        return x.new_empty(x.shape), scores.new_empty(scores.shape)


    @_custom_op("zoo::edge_attention_backward")
    def _edge_attention_bwd(grad_out: Tensor, grad_alpha: Optional[Tensor], alpha: Tensor, x: Tensor,
                            dst: Tensor, orders: List[Tensor], keep: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        return _backward(grad_out, grad_alpha, alpha, x, dst, orders, keep)


    @_edge_attention_bwd.register_fake
    def _(grad_out, grad_alpha, alpha, x, dst, orders, keep):
        return alpha.new_empty(alpha.shape), x.new_empty(x.shape)


    def _setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor]) -> None:
        _, x, dst, orders, _, keep = inputs
        ctx.has_keep = keep is not None
        ctx.save_for_backward(output[1], x, dst, *((keep,) if ctx.has_keep else ()), *orders)


    def _grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        alpha, x, dst, *rest = ctx.saved_tensors
        keep, orders = (rest[0], list(rest[1:])) if ctx.has_keep else (None, list(rest))
        if grad_out is None:
            grad_out = torch.zeros_like(x)
        grad_scores, grad_x = _edge_attention_bwd(grad_out.contiguous(), grad_alpha, alpha, x, dst, orders, keep)
        return grad_scores, grad_x, None, [None] * len(orders), None, None


    _edge_attention.register_autograd(_grad, setup_context=_setup)

    def _fold_keep(keep: Optional[Tensor], dim: Optional[int], b: int) -> Optional[Tensor]:
        return None if keep is None else _fold(keep, dim, b)

    def _fwd_vmap(info: Any, in_dims: Sequence[Any], scores: Tensor, x: Tensor, dst: Tensor, orders: List[Tensor],
                  num_nodes: int, keep: Optional[Tensor]) -> Tuple[Tuple[Tensor, Tensor], Tuple[int, int]]:
        s_dim, x_dim, dst_dim, order_dims, _, k_dim = in_dims
        _shared_graph(dst_dim, order_dims)
        b = info.batch_size
        out, alpha = _edge_attention(_fold(scores, s_dim, b), _fold(x, x_dim, b), dst, orders, num_nodes,
                                     _fold_keep(keep, k_dim, b))
        return (_unfold(out, b), _unfold(alpha, b)), (1, 1)


    def _bwd_vmap(info: Any, in_dims: Sequence[Any], grad_out: Tensor, grad_alpha: Optional[Tensor], alpha: Tensor,
                  x: Tensor, dst: Tensor, orders: List[Tensor],
                  keep: Optional[Tensor]) -> Tuple[Tuple[Tensor, Tensor], Tuple[int, int]]:
        go_dim, ga_dim, a_dim, x_dim, dst_dim, order_dims, k_dim = in_dims
        _shared_graph(dst_dim, order_dims)
        b = info.batch_size
        ga = None if grad_alpha is None else _fold(grad_alpha, ga_dim, b)
        grad_scores, grad_x = _edge_attention_bwd(_fold(grad_out, go_dim, b).contiguous(), ga, _fold(alpha, a_dim, b),
                                                  _fold(x, x_dim, b), dst, orders, _fold_keep(keep, k_dim, b))
        return (_unfold(grad_scores, b), _unfold(grad_x, b)), (1, 1)


    torch.library.register_vmap("zoo::edge_attention", _fwd_vmap)
    torch.library.register_vmap("zoo::edge_attention_backward", _bwd_vmap)


def edge_attention(scores: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_nodes: int,
                   orders: Optional[Orders] = None, keep: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""Softmax of ``scores`` over each destination's incoming edges, then ``h'_v = sum_u alpha_uv x_u``.

    Equals ``alpha = segment_softmax(scores, dst, n)``,
    ``out = segment_sum(alpha[..., None] * gather_rows(x, src), dst, n)`` (to rounding), with its
    own backward and no ``(E, heads, channels)`` intermediate.  ``orders``: the graph's
    :func:`edge_orders` (the layers pass :func:`graph_orders`, computed once per graph).
    ``keep``: attention dropout's scaled keep mask (:func:`zoo.ops.dropout.dropout_mask`); the
    aggregation then weighs by ``alpha * keep`` (the returned ``alpha`` stays undropped, as the
    plain path's).

    Shapes:
        scores: ``(E, H)``; x: ``(N, H, C)``; src, dst: ``(E,)``; keep: ``(E, H)`` -> out ``(N, H, C)``,
        alpha ``(E, H)``.
    """
    if _vmap_without_rules(scores, x, keep):  # torch < 2.4 under vmap: the equation in vmappable plain ops
        alpha = segment_softmax(scores, dst, num_nodes)
        weights = alpha if keep is None else alpha * keep
        return segment_sum(weight_messages(weights, gather_rows(x, src)), dst, num_nodes), alpha
    if orders is None:
        orders = edge_orders(src, dst, num_nodes)
    if _is_batched(scores) or _is_batched(x) or (keep is not None and _is_batched(keep)):
        return _edge_attention(scores, x, dst, list(orders), num_nodes, keep)
    return _EdgeAttention.apply(scores, x, dst, num_nodes, keep, *orders)


__all__ = ["edge_attention", "edge_orders", "graph_orders"]
