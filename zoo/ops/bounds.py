"""Per-destination bounds over edges: a neighbourhood maximum of a node quantity and the division of
edge scores by their destination's bound (LipschitzNorm's Eq. 17, :mod:`zoo.norms.lipschitz`).

Each function is one compiled pass (forward and backward; ``cpu/segment_max.cpp``) on the CPU and
the torch expression it names elsewhere: the same numbers, gradient included (ties of a maximum
share its gradient evenly, as ``scatter_reduce``'s), without the ``(E, ...)`` gathered copies, masks
and counts of that expression's autograd.  Under ``torch.func.vmap`` one call serves all replicas
(an outer dimension of the kernels).  :func:`on_replicas` runs a whole bound rule made of these ops once on
the replicas' physical tensors (:mod:`zoo.ops._direct`): the same ops, kernels and autograd nodes, without a
vmap layer (and, for the custom ops, torch.library's Python layers) around each.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._direct import Formula, direct_op, vmapped
from zoo.ops.segment import _COPY_ROWS_MAX, compiled_edge_op_serves, gather_rows, replicas_first, segment_max

if HAS_CUSTOM_OPS:
    from zoo.ops.segment import _max_setup

    @_custom_op("zoo::neighbour_max")
    def _neighbour_max(x: Tensor, src: Tensor, dst: Tensor, num_nodes: int, dim: int) -> Tensor:
        return torch.ops.zoo_kernels.neighbour_max(x, src, dst, num_nodes, dim)


    @_custom_op("zoo::neighbour_max_backward")
    def _neighbour_max_backward(grad: Tensor, x: Tensor, src: Tensor, dst: Tensor, result: Tensor, dim: int) -> Tensor:
        return torch.ops.zoo_kernels.neighbour_max_backward(grad, x, src, dst, result, dim)


    @_custom_op("zoo::scale_divide")
    def _scale_divide(s: Tensor, b: Tensor, dst: Tensor, alpha: float, dim: int) -> Tensor:
        return torch.ops.zoo_kernels.scale_divide(s, b, dst, alpha, dim)


    @_custom_op("zoo::scale_divide_backward")
    def _scale_divide_backward(grad: Tensor, out: Tensor, b: Tensor, dst: Tensor, alpha: float,
                               dim: int) -> Tuple[Tensor, Tensor]:
        return torch.ops.zoo_kernels.scale_divide_backward(grad, out, b, dst, alpha, dim)


    @_neighbour_max.register_fake
    def _(x: Tensor, src: Tensor, dst: Tensor, num_nodes: int, dim: int) -> Tensor:
        shape = list(x.shape)
        shape[dim] = num_nodes
        return x.new_empty(shape)


    @_neighbour_max_backward.register_fake
    def _(grad: Tensor, x: Tensor, src: Tensor, dst: Tensor, result: Tensor, dim: int) -> Tensor:
        return torch.empty_like(x)


    @_scale_divide.register_fake
    def _(s: Tensor, b: Tensor, dst: Tensor, alpha: float, dim: int) -> Tensor:
        return torch.empty_like(s)


    @_scale_divide_backward.register_fake
    def _(grad: Tensor, out: Tensor, b: Tensor, dst: Tensor, alpha: float, dim: int) -> Tuple[Tensor, Tensor]:
        return torch.empty_like(out), torch.empty_like(b)


    def _neighbour_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        x, src, dst, _, dim = inputs
        ctx.save_for_backward(x, src, dst, output)
        ctx.dim = dim


    def _neighbour_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None, None]:
        x, src, dst, result = ctx.saved_tensors
        return _neighbour_max_backward(grad, x, src, dst, result, ctx.dim), None, None, None, None


    def _divide_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        _, b, dst, alpha, dim = inputs
        ctx.save_for_backward(output, b, dst)
        ctx.alpha, ctx.dim = alpha, dim


    def _divide_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, Tensor, None, None, None]:
        out, b, dst = ctx.saved_tensors
        grad_s, grad_b = _scale_divide_backward(grad, out, b, dst, ctx.alpha, ctx.dim)
        return grad_s, grad_b, None, None, None


    _neighbour_max.register_autograd(_neighbour_backward, setup_context=_neighbour_setup)
    _scale_divide.register_autograd(_divide_backward, setup_context=_divide_setup)


    def _shared(*dims: Any) -> None:
        if any(d is not None for d in dims):
            raise ValueError("zoo bounds under vmap: the graph must be shared by all replicas")


    def _neighbour_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, src: Tensor, dst: Tensor, num_nodes: int,
                        dim: int) -> Tuple[Tensor, int]:
        _shared(in_dims[1], in_dims[2])
        return _neighbour_max(replicas_first(x, in_dims[0], info.batch_size), src, dst, num_nodes, dim + 1), 0


    def _neighbour_backward_vmap(info: Any, in_dims: Sequence[Any], grad: Tensor, x: Tensor, src: Tensor, dst: Tensor,
                                 result: Tensor, dim: int) -> Tuple[Tensor, int]:
        _shared(in_dims[2], in_dims[3])
        b = info.batch_size
        out = _neighbour_max_backward(replicas_first(grad, in_dims[0], b), replicas_first(x, in_dims[1], b), src, dst,
                                      replicas_first(result, in_dims[4], b), dim + 1)
        return out, 0


    def _divide_vmap(info: Any, in_dims: Sequence[Any], s: Tensor, b: Tensor, dst: Tensor, alpha: float,
                     dim: int) -> Tuple[Tensor, int]:
        _shared(in_dims[2])
        r = info.batch_size
        return _scale_divide(replicas_first(s, in_dims[0], r), replicas_first(b, in_dims[1], r), dst, alpha, dim + 1), 0


    def _divide_backward_vmap(info: Any, in_dims: Sequence[Any], grad: Tensor, out: Tensor, b: Tensor, dst: Tensor,
                              alpha: float, dim: int) -> Tuple[Tuple[Tensor, Tensor], Tuple[int, int]]:
        _shared(in_dims[3])
        r = info.batch_size
        grads = _scale_divide_backward(replicas_first(grad, in_dims[0], r), replicas_first(out, in_dims[1], r),
                                       replicas_first(b, in_dims[2], r), dst, alpha, dim + 1)
        return grads, (0, 0)


    torch.library.register_vmap("zoo::neighbour_max", _neighbour_vmap)
    torch.library.register_vmap("zoo::neighbour_max_backward", _neighbour_backward_vmap)
    torch.library.register_vmap("zoo::scale_divide", _divide_vmap)
    torch.library.register_vmap("zoo::scale_divide_backward", _divide_backward_vmap)


def neighbour_max(x: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """``max`` over each node's incoming edges of its source's row: ``segment_max(x[src], dst)``
    (``(N, ...)`` -> ``(num_nodes, ...)``; no edge: ``-inf``), gradient included."""
    if compiled_edge_op_serves(x):
        return _neighbour_max(x, src, dst, num_nodes, 0)
    return segment_max(x.index_select(0, src), dst, num_nodes)


def scale_divide(scores: Tensor, bound: Tensor, dst: Tensor, alpha: float) -> Tensor:
    """``alpha * scores / bound[dst]``: edge scores ``(E, ...)`` over their destination's bound
    ``(N, ...)``, gradient included."""
    if compiled_edge_op_serves(scores) and bound.dtype == scores.dtype:
        return _scale_divide(scores, bound, dst, float(alpha), 0)
    return alpha * scores / bound.index_select(0, dst)


class BoundOps(NamedTuple):
    """:func:`neighbour_max`, :func:`scale_divide`, :func:`zoo.ops.segment.segment_max` and
    :func:`zoo.ops.segment.gather_rows` (without a ``dim``) for a rule of :func:`on_replicas`: the
    public functions on logical tensors, or the same kernels and gathers on replicas-first ones."""

    neighbour_max: Callable[[Tensor, Tensor, Tensor, int], Tensor]
    scale_divide: Callable[[Tensor, Tensor, Tensor, float], Tensor]
    segment_max: Callable[[Tensor, Tensor, int], Tensor]
    gather_rows: Callable[[Tensor, Tensor], Tensor]


#: the ops of a rule called on logical tensors (no replica dim)
LOGICAL = BoundOps(neighbour_max, scale_divide, segment_max, gather_rows)


def _gather_replica_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x[:, index]`` of a replicas-first tensor as gather_rows' vmap rule gathers it: the replicas
    moved after the node dim (small strided rows copied first), one ``index_select`` of those rows,
    then the replicas moved back to the front (a view)."""
    rows = x.movedim(0, 1)
    if not rows.is_contiguous() and math.prod(rows.shape[1:]) <= _COPY_ROWS_MAX:
        rows = rows.contiguous()
    return rows.index_select(0, index).movedim(1, 0)


def _physical_ops() -> Optional[BoundOps]:
    """The kernels on replicas-first ``(R, N, ...)`` / ``(R, E, ...)`` tensors, each call one autograd
    node with its op's formula (:func:`zoo.ops._direct.direct_op`); the backward calls the backward
    kernel itself, as the op's vmap rule does for the replicas' gradients."""
    if not HAS_CUSTOM_OPS:
        return None
    kernels = torch.ops.zoo_kernels

    def neighbour_grad(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None, None]:
        x, src, dst, result = ctx.saved_tensors
        return kernels.neighbour_max_backward(grad, x, src, dst, result, ctx.dim), None, None, None, None

    def divide_grad(ctx: Any, grad: Tensor) -> Tuple[Tensor, Tensor, None, None, None]:
        out, b, dst = ctx.saved_tensors
        grad_s, grad_b = kernels.scale_divide_backward(grad, out, b, dst, ctx.alpha, ctx.dim)
        return grad_s, grad_b, None, None, None

    def max_grad(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None]:
        values, index, result = ctx.saved_tensors
        return kernels.segment_max_backward(grad, values, index, result, ctx.dim), None, None, None

    n_max = direct_op(Formula(lambda *a: kernels.neighbour_max(*a), _neighbour_setup, neighbour_grad))
    divide = direct_op(Formula(lambda *a: kernels.scale_divide(*a), _divide_setup, divide_grad))
    s_max = direct_op(Formula(lambda *a: kernels.segment_max(*a), _max_setup, max_grad))
    return BoundOps(lambda x, src, dst, n: n_max(x, src, dst, n, 1),
                    lambda s, b, dst, alpha: divide(s, b, dst, float(alpha), 1),
                    lambda values, index, n: s_max(values, index, n, 1), _gather_replica_rows)


_PHYSICAL: Optional[BoundOps] = None


def _edge_sum_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    a, _, src, dst, dim = inputs
    ctx.save_for_backward(src, dst)
    ctx.n, ctx.dim = a.shape[dim], dim


def _edge_sum_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, Tensor, None, None, None]:
    src, dst = ctx.saved_tensors
    grad_a, grad_b = torch.ops.zoo_kernels.edge_sum_backward(grad, src, dst, ctx.n, ctx.dim)
    return grad_a, grad_b, None, None, None


_EDGE_SUM: Optional[Callable[..., Tensor]] = None


def edge_sum(a: Tensor, b: Tensor, src: Tensor, dst: Tensor) -> Tensor:
    """``a[src] + b[dst]``: node terms ``(N, ...)`` summed per edge ``(E, ...)``, gradient included
    (each term's gradient added at its node in edge order from zero, as ``index_select``'s backward).

    Under one ``torch.func.vmap`` with the compiled edge ops serving, one compiled pass over the
    replicas' physical tensors (replicas first) and one for the backward; otherwise the two gathers
    (:func:`zoo.ops.segment.gather_rows`) and the sum."""
    global _EDGE_SUM

    def physical(info: Any, dims: Sequence[Any], a: Tensor, b: Tensor, src: Tensor, dst: Tensor) -> Tuple[Tensor, int]:
        _shared(dims[2], dims[3])
        r = info.batch_size
        return _EDGE_SUM(replicas_first(a, dims[0], r), replicas_first(b, dims[1], r), src, dst, 1), 0

    if HAS_CUSTOM_OPS and a.dtype == b.dtype and compiled_edge_op_serves(a):
        if _EDGE_SUM is None:
            kernels = torch.ops.zoo_kernels
            _EDGE_SUM = direct_op(Formula(lambda *args: kernels.edge_sum(*args), _edge_sum_setup, _edge_sum_backward))
        done = vmapped(physical, (a, b, src, dst))
        if done is not None:
            return done
    return gather_rows(a, src) + gather_rows(b, dst)


def on_replicas(rule: Callable[..., Tensor], replicated: Sequence[Tensor], src: Tensor, dst: Tensor,
                *constants: Any) -> Tensor:
    """``rule(ops, *replicated, src, dst, *constants)``: under one ``torch.func.vmap`` with the compiled
    edge ops serving, once on the physical tensors, replicas first (``ops`` the kernels over dim 1,
    the result batched again at dim 0); otherwise on the tensors as given (``ops`` = :data:`LOGICAL`).

    ``rule`` must be written for an optional leading replica dim (node tensors ``(..., N, ...)``,
    per-replica vectors broadcast with ``unsqueeze(-2)``); the graph (``src``, ``dst``) is shared by
    all replicas.  Same numbers either way: the same ops and kernels on the same physical data."""
    global _PHYSICAL

    def physical(info: Any, dims: Sequence[Any], *args: Any) -> Tuple[Tensor, int]:
        k = len(replicated)
        _shared(*dims[k:k + 2])
        tensors = [replicas_first(t, d, info.batch_size) for t, d in zip(args[:k], dims[:k])]
        return rule(_PHYSICAL, *tensors, *args[k:]), 0

    if compiled_edge_op_serves(replicated[0]) and len({t.dtype for t in replicated}) == 1:
        if _PHYSICAL is None:
            _PHYSICAL = _physical_ops()
        if _PHYSICAL is not None:
            done = vmapped(physical, (*replicated, src, dst, *constants))
            if done is not None:
                return done
    return rule(LOGICAL, *replicated, src, dst, *constants)


__all__ = ["BoundOps", "LOGICAL", "edge_sum", "neighbour_max", "on_replicas", "scale_divide"]
