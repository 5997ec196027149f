"""Fake (meta), autograd and vmap rules shared by the C++ and the Triton attention ops.

Each backend provides four ops with the same schemas (``gatv2_forward``, ``gatv2_backward``,
``gat_forward``, ``gat_backward``; see ``cpu/attention.cpp``).  Under ``torch.func.vmap`` the
replica dimension is folded into the heads — one call for all replicas, as in
:mod:`zoo.nn.fused` — which is exact because every head is computed on its own.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple

import torch
from torch import Tensor

GRAPH_ARGS = 6  # crow, col, perm (CSR by destination), crow_s, col_s, perm_s (by source)


def _fold(t: Optional[Tensor], dim: Optional[int], batch: int) -> Optional[Tensor]:
    """Replica dim to position 1, merged with the heads: ``(N|E, R, H, ...)`` -> ``(N|E, R*H, ...)``."""
    if t is None:
        return None
    t = t.movedim(dim, 1) if dim is not None else t.unsqueeze(1).expand(t.shape[0], batch, *t.shape[1:])
    return t.reshape(t.shape[0], -1, *t.shape[3:])


def _fold_att(att: Tensor, dim: Optional[int], batch: int) -> Tensor:
    """``(R, H, C)`` -> ``(R*H, C)`` (the replica is already the leading dim of a parameter)."""
    att = att.movedim(dim, 0) if dim is not None else att.expand(batch, *att.shape)
    return att.reshape(-1, att.shape[-1])


#: Under vmap, replicas are folded into the heads (one call) unless splitting them buys cache: the
#: op runs once per replica when one replica's values fit this many bytes and all replicas' do not.
#: The row gathers jump around the graph, and one replica's rows stay in cache where all replicas' do
#: not (Cora, 15 replicas x 64 channels: attention fwd+bwd 57 ms folded, 15 x 2.9 ms one by one);
#: when even one replica's rows do not fit (PubMed, 8 heads x 8 channels: 5 MB per replica), one
#: folded pass over the graph wins (training 261-267 vs 291-298 ms per replica-epoch at R = 15).
#: The same numbers either way: every head is computed on its own.
FOLD_MAX_BYTES = 2 << 20


def _fold_fits(values: Tensor, dim: Optional[int], batch: int) -> bool:
    """Whether to fold the replicas of ``values`` (the physical tensor; ``dim``: its replica dim)
    into one call: always on a GPU (one launch over all replicas' heads is the parallelism); on the
    CPU unless one replica's values fit :data:`FOLD_MAX_BYTES` and the folded ones do not."""
    if values.device.type != "cpu":
        return True
    folded = values.numel() * values.element_size() * (1 if dim is not None else batch)
    return folded <= FOLD_MAX_BYTES or folded // batch > FOLD_MAX_BYTES


def _per_replica(call: Callable[..., Sequence[Tensor]], batch: int, args: Sequence[Any], dims: Sequence[Any],
                 out_dims: Sequence[int]) -> Tuple[Tensor, ...]:
    """``call`` once per replica on its slices; the results stacked along ``out_dims``.

    ``unbind`` (not ``select`` per replica): autograd may record these ops, and one unbind has one
    backward (a stack) where R selects would each scatter into a zero tensor of the full size."""
    slices = [t.unbind(d) if isinstance(t, Tensor) and d is not None else None for t, d in zip(args, dims)]
    results = [call(*[a if s is None else s[r] for a, s in zip(args, slices)]) for r in range(batch)]
    return tuple(torch.stack([res[i] for res in results], d) for i, d in enumerate(out_dims))


def _unfold(t: Tensor, batch: int) -> Tensor:
    return t.view(t.shape[0], batch, t.shape[1] // batch, *t.shape[2:])


def _shared_graph(dims: Sequence[Optional[int]]) -> None:
    if any(d is not None for d in dims):
        raise ValueError("compiled attention under vmap: the graph must be shared by all replicas "
                         "(vmap over parameters and features, not over edge indices)")


def register(ns: str) -> None:
    """Register the fake, autograd and vmap rules of ``ns::{gatv2,gat}_{forward,backward}``."""
    ops = getattr(torch.ops, ns)
    lib = f"{ns}::"

    # ------------------------------------------------------------------ fake (shapes only)
    def fwd_fake(values: Tensor, col: Tensor, heads: int) -> Tuple[Tensor, Tensor, Tensor]:
        n = values.shape[0]
        return (values.new_empty(values.shape), values.new_empty((col.shape[0], heads)),
                values.new_empty((n, heads)))

    @torch.library.register_fake(lib + "gatv2_forward")
    def _(x_src, x_dst, values, att, crow, col, perm, crow_s, col_s, perm_s, slope):
        return fwd_fake(values, col, x_src.shape[1])

    @torch.library.register_fake(lib + "gat_forward")
    def _(score_src, score_dst, bias, values, crow, col, perm, crow_s, col_s, perm_s, slope):
        return fwd_fake(values, col, score_src.shape[1])

    @torch.library.register_fake(lib + "gatv2_backward")
    def _(grad_out, grad_alpha, x_src, x_dst, values, att, out, lse, *graph_and_slope):
        return (x_src.new_empty(x_src.shape), x_dst.new_empty(x_dst.shape), values.new_empty(values.shape),
                att.new_empty(att.shape))

    @torch.library.register_fake(lib + "gat_backward")
    def _(grad_out, grad_alpha, score_src, score_dst, bias, values, out, lse, crow, col, *rest):
        return (score_src.new_empty(score_src.shape), score_dst.new_empty(score_dst.shape),
                values.new_empty(values.shape), values.new_empty((col.shape[0], score_src.shape[1])))

    # ------------------------------------------------------------------ autograd
    def gatv2_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        x_src, x_dst, values, att, *graph, slope = inputs
        ctx.save_for_backward(x_src, x_dst, values, att, output[0], output[2], *graph)
        ctx.slope = slope

    def gatv2_grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
                   _grad_lse: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        x_src, x_dst, values, att, out, lse, *graph = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        d_src, d_dst, d_val, d_att = ops.gatv2_backward(grad_out.contiguous(), grad_alpha, x_src, x_dst, values,
                                                        att, out, lse, *graph, ctx.slope)
        return (d_src, d_dst, d_val, d_att) + (None,) * (GRAPH_ARGS + 1)

    torch.library.register_autograd(lib + "gatv2_forward", gatv2_grad, setup_context=gatv2_setup)

    def gat_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        score_src, score_dst, bias, values, *graph, slope = inputs
        ctx.has_bias = bias is not None
        ctx.save_for_backward(score_src, score_dst, bias, values, output[0], output[2], *graph)
        ctx.slope = slope

    def gat_grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
                 _grad_lse: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        score_src, score_dst, bias, values, out, lse, *graph = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        d_s, d_t, d_val, d_bias = ops.gat_backward(grad_out.contiguous(), grad_alpha, score_src, score_dst, bias,
                                                   values, out, lse, *graph, ctx.slope)
        return (d_s, d_t, d_bias if ctx.has_bias else None, d_val) + (None,) * (GRAPH_ARGS + 1)

    torch.library.register_autograd(lib + "gat_forward", gat_grad, setup_context=gat_setup)

    # ------------------------------------------------------------------ vmap: replicas -> heads
    def gatv2_fwd_vmap(info: Any, in_dims: Sequence[Any], x_src, x_dst, values, att, *graph_and_slope):
        xs, xd, xv, xa, *graph, _ = in_dims
        _shared_graph(graph)
        b = info.batch_size
        if not _fold_fits(values, xv, b):
            return _per_replica(ops.gatv2_forward, b, (x_src, x_dst, values, att) + graph_and_slope, in_dims,
                                (1, 1, 1)), (1, 1, 1)
        out, alpha, lse = ops.gatv2_forward(_fold(x_src, xs, b), _fold(x_dst, xd, b), _fold(values, xv, b),
                                            _fold_att(att, xa, b), *graph_and_slope)
        return (_unfold(out, b), _unfold(alpha, b), _unfold(lse, b)), (1, 1, 1)

    def gatv2_bwd_vmap(info: Any, in_dims: Sequence[Any], grad_out, grad_alpha, x_src, x_dst, values, att, out, lse,
                       *graph_and_slope):
        dg, dga, xs, xd, xv, xa, do, dl, *graph_dims = in_dims
        _shared_graph(graph_dims[:-1])
        b = info.batch_size
        if not _fold_fits(values, xv, b):
            args = (grad_out, grad_alpha, x_src, x_dst, values, att, out, lse) + graph_and_slope
            return _per_replica(ops.gatv2_backward, b, args, in_dims, (1, 1, 1, 0)), (1, 1, 1, 0)
        d_src, d_dst, d_val, d_att = ops.gatv2_backward(
            _fold(grad_out, dg, b).contiguous(), _fold(grad_alpha, dga, b), _fold(x_src, xs, b), _fold(x_dst, xd, b),
            _fold(values, xv, b), _fold_att(att, xa, b), _fold(out, do, b), _fold(lse, dl, b), *graph_and_slope)
        return ((_unfold(d_src, b), _unfold(d_dst, b), _unfold(d_val, b), d_att.view(b, *att.shape[-2:])),
                (1, 1, 1, 0))

    def gat_fwd_vmap(info: Any, in_dims: Sequence[Any], score_src, score_dst, bias, values, *graph_and_slope):
        ds, dt, dbias, dv, *graph, _ = in_dims
        _shared_graph(graph)
        b = info.batch_size
        if not _fold_fits(values, dv, b):
            return _per_replica(ops.gat_forward, b, (score_src, score_dst, bias, values) + graph_and_slope, in_dims,
                                (1, 1, 1)), (1, 1, 1)
        out, alpha, lse = ops.gat_forward(_fold(score_src, ds, b), _fold(score_dst, dt, b), _fold(bias, dbias, b),
                                          _fold(values, dv, b), *graph_and_slope)
        return (_unfold(out, b), _unfold(alpha, b), _unfold(lse, b)), (1, 1, 1)

    def gat_bwd_vmap(info: Any, in_dims: Sequence[Any], grad_out, grad_alpha, score_src, score_dst, bias, values, out,
                     lse, *graph_and_slope):
        dg, dga, ds, dt, dbias, dv, do, dl, *graph_dims = in_dims
        _shared_graph(graph_dims[:-1])
        b = info.batch_size
        if not _fold_fits(values, dv, b):
            args = (grad_out, grad_alpha, score_src, score_dst, bias, values, out, lse) + graph_and_slope
            return _per_replica(ops.gat_backward, b, args, in_dims, (1, 1, 1, 1)), (1, 1, 1, 1)
        d_s, d_t, d_val, d_bias = ops.gat_backward(
            _fold(grad_out, dg, b).contiguous(), _fold(grad_alpha, dga, b), _fold(score_src, ds, b),
            _fold(score_dst, dt, b), _fold(bias, dbias, b), _fold(values, dv, b), _fold(out, do, b),
            _fold(lse, dl, b), *graph_and_slope)
        return (_unfold(d_s, b), _unfold(d_t, b), _unfold(d_val, b), _unfold(d_bias, b)), (1, 1, 1, 1)

    torch.library.register_vmap(lib + "gatv2_forward", gatv2_fwd_vmap)
    torch.library.register_vmap(lib + "gatv2_backward", gatv2_bwd_vmap)
    torch.library.register_vmap(lib + "gat_forward", gat_fwd_vmap)
    torch.library.register_vmap(lib + "gat_backward", gat_bwd_vmap)
