"""The fused attention in Triton (CUDA): the same three phases as ``cpu/attention.cpp``.

The kernels (:mod:`.triton_kernels`) run one program per (row, head).  The rows are split once
per graph into light and heavy buckets (:mod:`.degree_buckets`), which the ops take as arguments
(:func:`~.ops.graph_arguments`): a light row (degree <= ``BLOCK_E``) is one block of edges with no
loop; a heavy row loops over blocks of ``HEAVY_BLOCK_E``.  A call computes nothing from the graph
and allocates its outputs only (the slope is a cached one-element tensor); each phase is two
launches, one per bucket (an empty bucket launches nothing):

* forward, by destination: ``out``, ``lse`` and ``alpha``;
* backward pass A, by destination: ``alpha`` from ``lse``, ``de``, the destination-side gradient
  and per-destination partials of ``d a`` (GATv2), summed by a column kernel in a fixed order;
* backward pass B, by source over the reverse CSR: ``d values`` and the source-side gradient.

No atomics anywhere; each program reads one head only, so a replica's numbers do not depend on
how many are folded in.  On CPU tensors the kernels run in Triton's interpreter (the tests,
``TRITON_INTERPRET=1``).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

import torch
import triton
from torch import Tensor

from zoo.ops._compiled import rules
from zoo.ops._compiled.triton_kernels import RAW_KERNELS

NS = "zoo_triton"
#: Edges per block of a light row, and the light/heavy threshold: most rows of the zoo's graphs fit.
BLOCK_E = 16
#: Edges per block of a heavy row's loop.
HEAVY_BLOCK_E = 64
#: Rows per block of the column sum of ``d a``.
BLOCK_N = 64


@functools.lru_cache(maxsize=None)
def kernels(interpret: bool) -> Dict[str, Any]:
    """The kernels, compiled (``triton.jit``) or for Triton's interpreter (CPU tensors)."""
    if interpret:
        from triton.runtime.interpreter import InterpretedFunction
        return {k: InterpretedFunction(f) for k, f in RAW_KERNELS.items()}
    from triton.runtime.jit import JITFunction
    return {k: JITFunction(f) for k, f in RAW_KERNELS.items()}


def _pow2(n: int) -> int:
    return max(2, triton.next_power_of_2(max(1, n)))


def _kernels_for(t: Tensor) -> Dict[str, Any]:
    return kernels(t.device.type != "cuda")


def _c(t: Optional[Tensor]) -> Optional[Tensor]:
    return None if t is None else t.contiguous()


#: (slope, dtype, device) -> the slope as a one-element tensor of the values' dtype (the kernels read it
#: in that precision); one per distinct slope, so a call allocates and fills nothing for it
_SLOPES: Dict[Tuple[float, torch.dtype, torch.device], Tensor] = {}


def _slope(values: Tensor, slope: float) -> Tensor:
    key = (float(slope), values.dtype, values.device)
    hit = _SLOPES.get(key)
    if hit is None:
        hit = _SLOPES[key] = torch.full((1,), float(slope), dtype=values.dtype, device=values.device)
    return hit


def _launch(kernel: Any, light: Tensor, heavy: Tensor, heads: int, *args: Any, **constexprs: Any) -> None:
    """``kernel`` over every row of the ``light`` and ``heavy`` buckets x ``heads``: one launch per
    non-empty bucket."""
    for rows, is_light in ((light, True), (heavy, False)):
        if rows.numel():
            kernel[(rows.numel(), heads)](rows, *args, LIGHT=is_light,
                                          BLOCK_E=BLOCK_E if is_light else HEAVY_BLOCK_E, **constexprs)


def _forward(v2: bool, xs: Tensor, xd: Tensor, att: Optional[Tensor], bias: Optional[Tensor], values: Tensor,
             graph: Tuple[Tensor, ...], slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    crow, col, perm, light, heavy = graph
    xs, xd, att, bias, values = map(_c, (xs, xd, att, bias, values))
    n, h, cv = values.shape
    c = xs.shape[2] if v2 else 1
    out = values.new_empty((n, h, cv))
    alpha = values.new_empty((col.numel(), h))
    lse = values.new_empty((n, h))
    if n and h:
        _launch(_kernels_for(values)["forward"], light, heavy, h,
                xs, xd, att if v2 else xs, bias if bias is not None else xs, values, crow, col, perm, out, alpha, lse,
                h, c, cv, _slope(values, slope), V2=v2, HAS_BIAS=bias is not None, BLOCK_C=_pow2(c),
                BLOCK_CV=_pow2(cv))
    return out, alpha, lse


def _backward(v2: bool, grad_out: Tensor, grad_alpha: Optional[Tensor], xs: Tensor, xd: Tensor,
              att: Optional[Tensor], bias: Optional[Tensor], values: Tensor, out: Tensor, lse: Tensor,
              graph: Tuple[Tensor, ...], slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    crow, col, perm, crow_s, col_s, perm_s, light, heavy, light_s, heavy_s = graph
    grad_out, grad_alpha, xs, xd, att, bias, values, out, lse = map(
        _c, (grad_out, grad_alpha, xs, xd, att, bias, values, out, lse))
    n, h, cv = values.shape
    c = xs.shape[2] if v2 else 1
    de = values.new_empty((col.numel(), h))  # GATv2: d e per edge; GAT: d z (= d bias)
    d_src, d_dst, d_val = torch.empty_like(xs), torch.empty_like(xd), torch.empty_like(values)
    part = values.new_empty((n, h, c)) if v2 else values.new_empty(0)
    launched = bool(n and h)
    # the column sum writes every entry of d_att; with nothing launched it is zero
    d_att = (torch.empty_like(att) if launched else torch.zeros_like(att)) if v2 else values.new_empty(0)
    if launched:
        k = _kernels_for(values)
        slope_t = _slope(values, slope)
        att_or_any, bias_or_any = att if v2 else xs, bias if bias is not None else xs
        blocks = dict(V2=v2, HAS_BIAS=bias is not None, BLOCK_C=_pow2(c), BLOCK_CV=_pow2(cv))
        _launch(k["backward_dst"], light, heavy, h,
                grad_out, grad_alpha if grad_alpha is not None else grad_out, xs, xd, att_or_any, bias_or_any, values,
                out, lse, crow, col, perm, de, d_dst, part, h, c, cv, slope_t, HAS_GA=grad_alpha is not None,
                **blocks)
        _launch(k["backward_src"], light_s, heavy_s, h,
                grad_out, xs, xd, att_or_any, bias_or_any, lse, crow_s, col_s, perm_s, de, d_src, d_val, h, c, cv,
                slope_t, **blocks)
        if v2:
            hc = h * c
            block_c = min(64, _pow2(hc))
            k["column_sum"][(triton.cdiv(hc, block_c),)](part, d_att, n, hc, BLOCK_N=BLOCK_N, BLOCK_C=block_c)
    return d_src, d_dst, d_val, (d_att if v2 else de)


@torch.library.custom_op(f"{NS}::gatv2_forward", mutates_args=())
def gatv2_forward(x_src: Tensor, x_dst: Tensor, values: Tensor, att: Tensor, crow: Tensor, col: Tensor, perm: Tensor,
                  crow_s: Tensor, col_s: Tensor, perm_s: Tensor, light: Tensor, heavy: Tensor, light_s: Tensor,
                  heavy_s: Tensor, slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    return _forward(True, x_src, x_dst, att, None, values, (crow, col, perm, light, heavy), slope)


@torch.library.custom_op(f"{NS}::gatv2_backward", mutates_args=())
def gatv2_backward(grad_out: Tensor, grad_alpha: Optional[Tensor], x_src: Tensor, x_dst: Tensor, values: Tensor,
                   att: Tensor, out: Tensor, lse: Tensor, crow: Tensor, col: Tensor, perm: Tensor, crow_s: Tensor,
                   col_s: Tensor, perm_s: Tensor, light: Tensor, heavy: Tensor, light_s: Tensor, heavy_s: Tensor,
                   slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return _backward(True, grad_out, grad_alpha, x_src, x_dst, att, None, values, out, lse,
                     (crow, col, perm, crow_s, col_s, perm_s, light, heavy, light_s, heavy_s), slope)


@torch.library.custom_op(f"{NS}::gat_forward", mutates_args=())
def gat_forward(score_src: Tensor, score_dst: Tensor, bias: Optional[Tensor], values: Tensor, crow: Tensor,
                col: Tensor, perm: Tensor, crow_s: Tensor, col_s: Tensor, perm_s: Tensor, light: Tensor, heavy: Tensor,
                light_s: Tensor, heavy_s: Tensor, slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    return _forward(False, score_src, score_dst, None, bias, values, (crow, col, perm, light, heavy), slope)


@torch.library.custom_op(f"{NS}::gat_backward", mutates_args=())
def gat_backward(grad_out: Tensor, grad_alpha: Optional[Tensor], score_src: Tensor, score_dst: Tensor,
                 bias: Optional[Tensor], values: Tensor, out: Tensor, lse: Tensor, crow: Tensor, col: Tensor,
                 perm: Tensor, crow_s: Tensor, col_s: Tensor, perm_s: Tensor, light: Tensor, heavy: Tensor,
                 light_s: Tensor, heavy_s: Tensor, slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return _backward(False, grad_out, grad_alpha, score_src, score_dst, None, bias, values, out, lse,
                     (crow, col, perm, crow_s, col_s, perm_s, light, heavy, light_s, heavy_s), slope)


#: the graph arguments: the six CSR tensors, then the degree buckets by destination and by source
GRAPH_ARGS = rules.GRAPH_ARGS + 4
rules.register(NS, graph_args=GRAPH_ARGS)


def ops() -> Any:
    """The ``torch.ops.zoo_triton`` namespace (same schemas as the C++ ops)."""
    return torch.ops.zoo_triton
