"""Per-edge products with their own backward: fewer ``(E, heads, channels)`` tensors kept or made.

:func:`weight_messages` (``alpha * m``), :func:`leaky_relu_dot` (GATv2's plain score),
:func:`node_scores` (GAT's per-node attention terms as one matrix product) and :func:`squared_norm`
(a score norm's per-node ``||x||^2``).  Each gives the same forward numbers as the elementwise
expression it replaces.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor


class _LeakyReluDot(torch.autograd.Function):
    """``(LeakyReLU(h) * a).sum(-1)`` that keeps only ``h`` for the backward (LeakyReLU(h) is recomputed)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(hidden: Tensor, att: Tensor, slope: float) -> Tensor:
        return (torch.nn.functional.leaky_relu(hidden, slope) * att).sum(-1)

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        hidden, att, slope = inputs
        ctx.save_for_backward(hidden, att)
        ctx.slope = slope

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], None]:
        hidden, att = ctx.saved_tensors
        g = grad.unsqueeze(-1)
        grad_hidden = grad_att = None
        if ctx.needs_input_grad[0]:
            grad_hidden = torch.ops.aten.leaky_relu_backward(g * att, hidden, ctx.slope, False)
        if ctx.needs_input_grad[1]:
            grad_att = (g * torch.nn.functional.leaky_relu(hidden, ctx.slope)).sum_to_size(att.shape)
        return grad_hidden, grad_att, None


class _WeightMessages(torch.autograd.Function):
    """``weights[..., None] * values`` whose backward computes the weights' gradient as a batched
    dot product (einsum -> bmm) instead of materialising another ``(E, H, C)`` product."""

    generate_vmap_rule = True

    @staticmethod
    def forward(weights: Tensor, values: Tensor) -> Tensor:
        return weights.unsqueeze(-1) * values

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        weights, values = ctx.saved_tensors
        grad_weights = torch.einsum("...c,...c->...", grad, values) if ctx.needs_input_grad[0] else None
        grad_values = grad * weights.unsqueeze(-1) if ctx.needs_input_grad[1] else None
        return grad_weights, grad_values


class _SquaredNorm(torch.autograd.Function):
    """``x.pow(2).sum(-1)`` whose backward is one pass over ``x``."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: Tensor) -> Tensor:
        return x.pow(2).sum(-1)

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        # autograd's pow backward is grad * (2 * x.pow(1)): a copy of x, a doubled copy, then the
        # product.  Doubling is exact, so (2 * grad) * x rounds the same real number: the same bits.
        return (grad * 2).unsqueeze(-1) * x


def squared_norm(x: Tensor) -> Tensor:
    """``||x||^2`` over the last dim: the numbers of ``x.pow(2).sum(-1)`` and of its gradient, whose
    backward makes one tensor of ``x``'s shape instead of three (LipschitzNorm's per-node input
    norms, ``(N, H, C)`` -> ``(N, H)``, one per layer and epoch)."""
    return _SquaredNorm.apply(x)


def weight_messages(weights: Tensor, values: Tensor) -> Tensor:
    """Messages ``alpha_uv * m_uv`` per edge and head: ``(E, H)``, ``(E, H, C)`` -> ``(E, H, C)``.

    Same forward as ``weights.unsqueeze(-1) * values``; the backward's peak memory is one
    ``(E, H, C)`` temporary lower (the weights' gradient needs no elementwise product).
    """
    return _WeightMessages.apply(weights, values)


def leaky_relu_dot(hidden: Tensor, att: Tensor, negative_slope: float) -> Tensor:
    r"""GATv2's score :math:`a^\top \mathrm{LeakyReLU}(h)` per edge and head.

    Same numbers as ``(F.leaky_relu(hidden, s) * att).sum(-1)``, but autograd keeps one
    ``(E, H, C)`` tensor (``hidden``) instead of two.  Shapes: ``(E, H, C)``, ``(H, C)`` -> ``(E, H)``.
    """
    return _LeakyReluDot.apply(hidden, att, negative_slope)


def node_scores(x: Tensor, att_src: Tensor, att_dst: Tensor) -> Tuple[Tensor, Tensor]:
    r"""GAT's per-node attention terms :math:`a_s^\top x_{v,h}` and :math:`a_t^\top x_{v,h}` per head.

    Same values as ``(x * att_src).sum(-1), (x * att_dst).sum(-1)`` (to rounding), computed as one
    matrix product ``x.view(N, H*C) @ B`` with ``B`` the ``(H*C, 2H)`` block-diagonal matrix of both
    attention vectors: ``x`` is read once and the backward is two more products, instead of
    ``(N, H, C)`` temporaries for each product and gradient (under vmap: one ``bmm``).  With several
    heads a non-finite entry of one head's ``x`` also makes the other heads' terms NaN (``inf * 0``).

    Shapes: x ``(N, H, C)``, att_src and att_dst ``(H, C)`` -> two ``(N, H)``.
    """
    n, heads, channels = x.shape
    both = torch.cat([att_src, att_dst], 0)  # (2H, C)
    if heads > 1:  # B[h*C + c, j] = both[j, c] if j % H == h else 0
        mask = torch.eye(heads, dtype=x.dtype, device=x.device).repeat(2, 1)  # (2H, H)
        both = (both.unsqueeze(1) * mask.unsqueeze(-1)).reshape(2 * heads, heads * channels)
    scores = x.reshape(n, heads * channels) @ both.t()
    return scores[:, :heads], scores[:, heads:]


__all__ = ["weight_messages", "leaky_relu_dot", "node_scores", "squared_norm"]
