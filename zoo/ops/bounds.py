"""Per-destination bounds over edges: a neighbourhood maximum of a node quantity and the division of
edge scores by their destination's bound (LipschitzNorm's Eq. 17, :mod:`zoo.norms.lipschitz`).

Each function is one compiled pass (forward and backward; ``cpu/segment_max.cpp``) on the CPU and
the torch expression it names elsewhere: the same numbers, gradient included (ties of a maximum
share its gradient evenly, as ``scatter_reduce``'s), without the ``(E, ...)`` gathered copies, masks
and counts of that expression's autograd.  Under ``torch.func.vmap`` one call serves all replicas
(an outer dimension of the kernels).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops.segment import compiled_edge_op_serves, replicas_first, segment_max

if HAS_CUSTOM_OPS:
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


__all__ = ["neighbour_max", "scale_divide"]
