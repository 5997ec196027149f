"""Gather, scatter and segment reductions over edges, fast under ``torch.func.vmap``.

Under ``vmap`` PyTorch lowers ``index_select`` / ``index_add`` on a batched tensor to ``gather`` /
``scatter_add`` with an index expanded to the full ``(replicas, E, heads, channels)`` shape —
several times the memory traffic of the data itself.  :func:`gather_rows` and the scatter behind
:func:`segment_sum` are two small custom operators (each the other's adjoint) whose vmap rule
instead places the replica dimension right after the indexed one and calls the same operator
once on the physical tensor: one ``index_select`` / ``index_add`` of contiguous
``(replicas x ...)`` rows, with the original ``(E,)`` index.
All functions here are out-of-place (in-place scatters into fresh tensors cannot be vmapped).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import custom_ops_active
from zoo.ops._custom import is_batched as _is_batched

_is_functorch_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor",
                                lambda t: False)

#: the largest row (elements per index, all replicas) that :func:`gather_rows` under vmap copies to a
#: contiguous tensor before gathering; larger strided rows gather in place (a copy of the whole tensor
#: then costs more than the strided gather saves; figures in docs/notes/performance.md)
_COPY_ROWS_MAX = 64

if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::gather_rows")
    def _gather_rows(x: Tensor, index: Tensor, dim: int) -> Tensor:
        return x.index_select(dim, index)


    @_custom_op("zoo::scatter_rows")
    def _scatter_rows(src: Tensor, index: Tensor, dim: int, size: int) -> Tensor:
        shape = list(src.shape)
        shape[dim] = size
        return src.new_zeros(shape).index_add_(dim, index, src)


    @_gather_rows.register_fake
    def _(x: Tensor, index: Tensor, dim: int) -> Tensor:
        shape = list(x.shape)
        shape[dim] = index.numel()
        return x.new_empty(shape)


    @_scatter_rows.register_fake
    def _(src: Tensor, index: Tensor, dim: int, size: int) -> Tensor:
        shape = list(src.shape)
        shape[dim] = size
        return src.new_empty(shape)


    def _gather_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        x, index, dim = inputs
        ctx.save_for_backward(index)
        ctx.dim, ctx.size = dim, x.shape[dim]


    def _gather_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None]:
        (index,) = ctx.saved_tensors
        return _scatter_rows(grad.contiguous(), index, ctx.dim, ctx.size), None, None


    def _scatter_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        _, index, dim, _ = inputs
        ctx.save_for_backward(index)
        ctx.dim = dim


    def _scatter_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None]:
        (index,) = ctx.saved_tensors
        return _gather_rows(grad, index, ctx.dim), None, None, None


    _gather_rows.register_autograd(_gather_backward, setup_context=_gather_setup)
    _scatter_rows.register_autograd(_scatter_backward, setup_context=_scatter_setup)


    def _gather_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, index: Tensor, dim: int) -> Tuple[Tensor, int]:
        x_dim, index_dim, _ = in_dims
        if index_dim is not None:  # per-replica indices (not used by the zoo): one call per replica
            x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
            index = index.movedim(index_dim, 0)
            return torch.stack([_gather_rows(x[r], index[r], dim) for r in range(info.batch_size)]), 0
        # Replica dim right after the indexed dim: every gathered row is one contiguous block.
        rows = x.movedim(x_dim, dim + 1)
        if dim == 0 and not rows.is_contiguous() and math.prod(rows.shape[1:]) <= _COPY_ROWS_MAX:
            # index_select of a strided tensor goes element by element (replicas-first scores, (N, R, H)
            # seen through the move), slower than a copy and a contiguous gather of its rows
            rows = rows.contiguous()
        return _gather_rows(rows, index, dim), dim + 1


    def _scatter_vmap(info: Any, in_dims: Sequence[Any], src: Tensor, index: Tensor, dim: int,
                      size: int) -> Tuple[Tensor, int]:
        src_dim, index_dim, _, _ = in_dims
        if index_dim is not None:
            src = src.movedim(src_dim, 0) if src_dim is not None else src.expand(info.batch_size, *src.shape)
            index = index.movedim(index_dim, 0)
            return torch.stack([_scatter_rows(src[r], index[r], dim, size) for r in range(info.batch_size)]), 0
        return _scatter_rows(src.movedim(src_dim, dim + 1), index, dim, size), dim + 1


    torch.library.register_vmap("zoo::gather_rows", _gather_vmap)
    torch.library.register_vmap("zoo::scatter_rows", _scatter_vmap)


    @_custom_op("zoo::segment_max")
    def _segment_max_op(values: Tensor, index: Tensor, num_segments: int, dim: int) -> Tensor:
        return torch.ops.zoo_kernels.segment_max(values, index, num_segments, dim)


    @_custom_op("zoo::segment_max_backward")
    def _segment_max_backward(grad: Tensor, values: Tensor, index: Tensor, result: Tensor, dim: int) -> Tensor:
        return torch.ops.zoo_kernels.segment_max_backward(grad, values, index, result, dim)


    @_segment_max_op.register_fake
    def _(values: Tensor, index: Tensor, num_segments: int, dim: int) -> Tensor:
        shape = list(values.shape)
        shape[dim] = num_segments
        return values.new_empty(shape)


    @_segment_max_backward.register_fake
    def _(grad: Tensor, values: Tensor, index: Tensor, result: Tensor, dim: int) -> Tensor:
        return torch.empty_like(values)


    def _max_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        values, index, _, dim = inputs
        ctx.save_for_backward(values, index, output)
        ctx.dim = dim


    def _max_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None]:
        values, index, result = ctx.saved_tensors
        return _segment_max_backward(grad, values, index, result, ctx.dim), None, None, None


    _segment_max_op.register_autograd(_max_backward, setup_context=_max_setup)


    def _max_vmap(info: Any, in_dims: Sequence[Any], values: Tensor, index: Tensor, num_segments: int,
                  dim: int) -> Tuple[Tensor, int]:
        values_dim, index_dim, _, _ = in_dims
        if index_dim is not None:
            raise ValueError("segment_max under vmap: the index must be shared by all replicas")
        return _segment_max_op(replicas_first(values, values_dim, info.batch_size), index, num_segments, dim + 1), 0


    def _max_backward_vmap(info: Any, in_dims: Sequence[Any], grad: Tensor, values: Tensor, index: Tensor,
                           result: Tensor, dim: int) -> Tuple[Tensor, int]:
        grad_dim, values_dim, index_dim, result_dim, _ = in_dims
        if index_dim is not None:
            raise ValueError("segment_max's backward under vmap: the index must be shared by all replicas")
        b = info.batch_size
        return _segment_max_backward(replicas_first(grad, grad_dim, b), replicas_first(values, values_dim, b), index,
                                     replicas_first(result, result_dim, b), dim + 1), 0


    torch.library.register_vmap("zoo::segment_max", _max_vmap)
    torch.library.register_vmap("zoo::segment_max_backward", _max_backward_vmap)


def replicas_first(t: Tensor, dim: Any, batch: int) -> Tensor:
    """A vmap rule's argument with its replica dim first (a view; expanded where it has none): the
    compiled edge kernels take the replicas as an outer dim, no copy when they lead already."""
    return t.movedim(dim, 0) if dim is not None else t.expand(batch, *t.shape)


def compiled_edge_op_serves(values: Tensor) -> bool:
    """Whether a compiled edge op with autograd and vmap rules (:func:`segment_max`,
    :mod:`zoo.ops.bounds`) computes on ``values``: CPU float32 / float64, the custom ops in use,
    outside any ``torch.func`` transform but vmap, and the kernels built."""
    if not custom_ops_active() or values.device.type != "cpu" or values.dtype not in (torch.float32, torch.float64):
        return False
    if _is_functorch_wrapped(values) and not _is_batched(values):
        return False
    from zoo.ops._compiled.build import load_cpu_kernels

    return load_cpu_kernels()


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` along dim 0 (``(N, ...)`` -> ``(E, ...)``), vmap-efficient."""
    if _is_batched(x):
        return _gather_rows(x, index, 0)
    return x.index_select(0, index)


# aten's index_add autograd keeps the whole ``source`` (e.g. the (E, H, C) messages) alive for the
# backward, which needs only the index: above this size the custom op (it saves the index alone)
# is used with grad too; below it the plain op avoids the custom op's Python dispatch.
_SAVE_FREE_MIN_NUMEL = 1 << 16


def segment_sum(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Sum the rows of ``values`` (``(E, ...)``) into ``num_segments`` buckets given by ``index`` (``(E,)``)."""
    if _is_batched(values) or (custom_ops_active() and values.requires_grad and torch.is_grad_enabled()
                               and values.numel() >= _SAVE_FREE_MIN_NUMEL):
        return _scatter_rows(values, index, 0, num_segments)
    return values.new_zeros((num_segments,) + tuple(values.shape[1:])).index_add_(0, index, values)


def segment_max(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Per-bucket maximum of ``values`` (``(E, H)``); empty buckets hold ``-inf``.

    On the CPU (float32 / float64, the compiled kernels built) one pass over the edges, with a
    backward of one more: the numbers of ``scatter_reduce(reduce="amax")`` and of its gradient (split
    evenly among tied maxima), without the index, masks and gathers its autograd formula
    materialises; otherwise that torch op."""
    if compiled_edge_op_serves(values):
        return _segment_max_op(values, index, num_segments, 0)
    out = values.new_full((num_segments,) + tuple(values.shape[1:]), float("-inf"))
    idx = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce="amax", include_self=True)


def segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    r"""Softmax of edge ``scores`` over the edges that share a destination.

    .. math:: \alpha_{uv} = \frac{\exp(e_{uv} - m_v)}{\sum_{u' \in \mathcal N(v)} \exp(e_{u'v} - m_v)},
              \quad m_v = \max_{u \in \mathcal N(v)} e_{uv}

    Shapes:
        scores: ``(E, H)``; index: ``(E,)`` destination of each edge; returns ``(E, H)``.
    """
    # The shift m_v does not change the softmax, so it needs no gradient (as in PyG).
    shift = gather_rows(segment_max(scores.detach(), index, num_segments), index)
    weights = (scores - shift).exp()
    denom = gather_rows(segment_sum(weights, index, num_segments), index)
    return weights / (denom + 1e-16)


def _edge_kernel(name: str, *tensors: Tensor) -> Any:
    """The compiled edge op ``name`` when it can serve ``tensors``: CPU float32 / float64 tensors
    outside any ``torch.func`` transform that need no gradient; else ``None`` (the torch ops)."""
    t = tensors[0]
    if t.device.type != "cpu" or t.dtype not in (torch.float32, torch.float64):
        return None
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        return None  # training: the torch ops and their autograd
    if any(_is_functorch_wrapped(x) for x in tensors):
        return None
    from zoo.ops._compiled.build import load_cpu_kernels

    return getattr(torch.ops.zoo_kernels, name, None) if load_cpu_kernels() else None


def gathered_product(a: Tensor, index_a: Tensor, b: Tensor, index_b: Tensor) -> Tensor:
    """``a[index_a] * b[index_b]`` along dim 0 (``(N, ...)`` -> ``(E, ...)``).

    Without a gradient to record on the CPU, one compiled pass that reads the rows in place (the
    same numbers: one rounded product per element); otherwise two gathers and a product."""
    kernel = _edge_kernel("gather_mul", a, b)
    if kernel is not None:
        return kernel(a, index_a, b, index_b)
    return gather_rows(a, index_a) * gather_rows(b, index_b)


class _GatheredDot(torch.autograd.Function):
    """``(a[index_a] * b[index_b]).sum(-1)`` with its gradients by the compiled edge ops: the forward
    :func:`_dot_forward`, the backward one pass over the edges (``gathered_dot_backward``) that adds
    each product of the gradient and the other factor into its row, in edge order: the numbers of the
    torch ops' autograd (the gathered ``(E, H, C)`` factors and their gradients never written; only the
    node tensors are kept for the backward)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, index_a: Tensor, b: Tensor, index_b: Tensor) -> Tensor:
        ctx.save_for_backward(a, index_a, b, index_b)
        return _dot_forward(a, index_a, b, index_b)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Any, None, Any, None]:
        a, index_a, b, index_b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
        grad_a, grad_b = torch.ops.zoo_kernels.gathered_dot_backward(grad, a, index_a, b, index_b, need_a, need_b)
        return (grad_a if need_a else None), None, (grad_b if need_b else None), None


#: (dtype, channels) -> the vector lanes at which ``zoo_kernels.gathered_dot`` adds the products in the
#: order of torch's sum here, or 0 where none does
_DOT_LANES: Dict[Tuple[torch.dtype, int], int] = {}


def _dot_lanes(dtype: torch.dtype, channels: int) -> int:
    """The lanes (torch's vector width, or 1 for its scalar path) at which the compiled dot product gives
    ``(a[ia] * b[ib]).sum(-1)``'s bits for rows of ``channels``, found once per dtype and width on 4096
    random rows of products spread over many binades (an order that differs changes some row's
    rounding); 0: none does (the caller sums with torch)."""
    key = (dtype, channels)
    if key not in _DOT_LANES:
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.randn(4096, 1, channels, generator=gen, dtype=dtype)
                * torch.exp2(torch.randint(-20, 20, (4096, 1, channels), generator=gen)).to(dtype) for _ in range(2))
        ia, ib = torch.randperm(4096, generator=gen), torch.randperm(4096, generator=gen)
        want = (a.index_select(0, ia) * b.index_select(0, ib)).sum(-1)
        _DOT_LANES[key] = 0
        for lanes in (16, 8, 4, 2, 1):
            if channels >= 64 * (lanes if channels >= lanes else 1):
                continue
            if torch.equal(torch.ops.zoo_kernels.gathered_dot(a, ia, b, ib, lanes), want):
                _DOT_LANES[key] = lanes
                break
    return _DOT_LANES[key]


def _dot_forward(a: Tensor, index_a: Tensor, b: Tensor, index_b: Tensor) -> Tensor:
    """The compiled forward: products and sums in one pass where :func:`_dot_lanes` found torch's order,
    else the products (``gather_mul``, read in place) then torch's sum."""
    lanes = _dot_lanes(a.dtype, a.size(-1))
    if lanes:
        return torch.ops.zoo_kernels.gathered_dot(a, index_a, b, index_b, lanes)
    return torch.ops.zoo_kernels.gather_mul(a, index_a, b, index_b).sum(-1)


def _compiled_pair_serves(op: str, a: Tensor, b: Tensor, dims: Tuple[int, int]) -> bool:
    """Whether the compiled kernel ``zoo_kernels.<op>`` serves two inputs: CPU float32 / float64 tensors
    of one dtype with ``dims`` dimensions, outside any ``torch.func`` transform, the kernels built."""
    if a.device.type != "cpu" or a.dtype not in (torch.float32, torch.float64) or b.dtype != a.dtype:
        return False
    if (a.dim(), b.dim()) != dims or _is_functorch_wrapped(a) or _is_functorch_wrapped(b):
        return False
    from zoo.ops._compiled.build import load_cpu_kernels

    return load_cpu_kernels() and hasattr(torch.ops.zoo_kernels, op)


def gathered_dot(a: Tensor, index_a: Tensor, b: Tensor, index_b: Tensor) -> Tensor:
    """``(a[index_a] * b[index_b]).sum(-1)``: per edge and head the dot product of two gathered rows
    (``(N, H, C)`` -> ``(E, H)``; e.g. attention scores ``q_dst . k_src``).

    On the CPU the compiled edge ops, with the torch ops' numbers (a one-pass backward where a gradient
    is recorded); otherwise the torch ops."""
    if not _compiled_pair_serves("gathered_dot", a, b, (3, 3)):
        return gathered_product(a, index_a, b, index_b).sum(-1)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _GatheredDot.apply(a, index_a, b, index_b)
    return _dot_forward(a, index_a, b, index_b)


class _WeightedGatherSum(torch.autograd.Function):
    """:func:`weighted_gather_sum` by the compiled edge ops, one head: the forward one pass over the edges,
    the backward one pass for both gradients (the weights' products summed in torch's order, the rows'
    added in edge order): the numbers of the torch expression's autograd, without its ``(E, C)`` copies."""

    @staticmethod
    def forward(ctx: Any, weights: Tensor, x: Tensor, src: Tensor, dst: Tensor, n: int) -> Tensor:
        ctx.save_for_backward(weights, x, src, dst)
        return torch.ops.zoo_kernels.weighted_gather_sum(weights, x, src, dst, n)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Any, Any, None, None, None]:
        weights, x, src, dst = ctx.saved_tensors
        need_w, need_x = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_w, grad_x = torch.ops.zoo_kernels.weighted_gather_sum_backward(
            grad, weights, x, src, dst, _dot_lanes(x.dtype, x.size(-1)), need_w, need_x)
        return (grad_w if need_w else None), (grad_x if need_x else None), None, None, None


def weighted_gather_sum(weights: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """``sum_{e: dst_e = i} weights[e, h] * x[src_e]`` per node ``i`` and head ``h``
    (``(E, H)``, ``(N, C)`` -> ``(num_nodes, H, C)``; e.g. ``P^h X`` for attention weights ``P^h``).

    On the CPU (float32 / float64, outside ``torch.func`` transforms) one compiled pass in edge order (the
    numbers of ``segment_sum(weights[..., None] * x[src][:, None], dst)``), and with one head and a gradient
    to record a compiled backward with that expression's gradients; otherwise the torch ops."""
    if _compiled_pair_serves("weighted_gather_sum", weights, x, (2, 2)):
        if not (torch.is_grad_enabled() and (weights.requires_grad or x.requires_grad)):
            return torch.ops.zoo_kernels.weighted_gather_sum(weights, x, src, dst, num_nodes)
        if weights.size(1) == 1 and _dot_lanes(x.dtype, x.size(-1)):
            return _WeightedGatherSum.apply(weights, x, src, dst, num_nodes)
    return segment_sum(weights.unsqueeze(-1) * gather_rows(x, src).unsqueeze(1), dst, num_nodes)


def neighbour_difference_sum(x: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """``sum_{e: dst_e = i} (x[src_e] - x[i])`` per node ``i`` (``(N, C)`` -> ``(num_nodes, C)``).

    Without a gradient to record on the CPU, one compiled pass over the edges in their order (the
    numbers of the torch ops: ``index_add`` adds each node's rows in edge order from zero);
    otherwise the two gathers, the difference and :func:`segment_sum`."""
    kernel = _edge_kernel("neighbour_difference_sum", x)
    if kernel is not None and x.dim() == 2:
        return kernel(x, src, dst, num_nodes)
    return segment_sum(gather_rows(x, src) - gather_rows(x, dst), dst, num_nodes)


__all__ = ["gather_rows", "gathered_dot", "gathered_product", "neighbour_difference_sum", "segment_max",
           "segment_softmax", "segment_sum", "weighted_gather_sum"]
