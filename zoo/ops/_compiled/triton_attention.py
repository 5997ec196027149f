"""The fused attention in Triton (CUDA): the same three phases as ``cpu/attention.cpp``.

One program per (destination, head) over the destination's CSR row in blocks of ``BLOCK_E``
edges (int64 offsets; rows of any degree), channels padded to a power of two and masked:

* forward: scores on the fly, online softmax, ``alpha * values`` accumulated; writes ``out``,
  ``lse`` and (a second sweep over the row) ``alpha``;
* backward pass A, by destination: ``alpha`` from ``lse``, ``de = alpha (d alpha - delta)``, the
  destination-side gradient and, for GATv2, a per-destination partial of ``d a`` (summed by a
  column kernel in a fixed order — no atomics anywhere);
* backward pass B, by source over the reverse CSR: ``d values`` and the source-side gradient.

One kernel per phase serves both families (``V2``: GATv2's vector score, else GAT's scalar one).
Each program reads one head only, so a replica's numbers do not depend on how many are folded in.
On CPU tensors the kernels run in Triton's interpreter (the tests, ``TRITON_INTERPRET=1``).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Tuple

import torch
import triton
import triton.language as tl
from torch import Tensor

from zoo.ops._compiled import rules

NS = "zoo_triton"
BLOCK_E = 16
BLOCK_N = 64


def _forward_kernel(xs, xd, att, bias, val, crow, col, perm, out, alpha, lse, H, C, CV, slope_ptr,
                    V2: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr,
                    BLOCK_CV: tl.constexpr):
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    slope = tl.load(slope_ptr)  # a tensor: a Python float would enter as float32
    dt = val.dtype.element_ty
    start = tl.load(crow + v)
    end = tl.load(crow + v + 1)
    offs_c = tl.arange(0, BLOCK_C)
    mc = offs_c < C
    offs_cv = tl.arange(0, BLOCK_CV)
    mcv = offs_cv < CV
    if V2:
        w = tl.load(att + h * C + offs_c, mask=mc, other=0.0)
        x_v = tl.load(xd + (v * H + h) * C + offs_c, mask=mc, other=0.0)
    else:
        t_v = tl.load(xd + v * H + h)
    m = tl.max(tl.full([BLOCK_E], float("-inf"), dt), 0)
    l = tl.sum(tl.zeros([BLOCK_E], dt), 0)
    acc = tl.zeros([BLOCK_CV], dt)
    for j0 in range(start, end, BLOCK_E):
        offs_e = j0 + tl.arange(0, BLOCK_E)
        me = offs_e < end
        u = tl.load(col + offs_e, mask=me, other=0)
        if V2:
            z = tl.load(xs + (u[:, None] * H + h) * C + offs_c[None, :], mask=me[:, None] & mc[None, :],
                        other=0.0) + x_v[None, :]
            e = tl.sum(tl.where(z > 0, z, z * slope) * w[None, :], 1)
        else:
            z = tl.load(xs + u * H + h, mask=me, other=0.0) + t_v
            if HAS_BIAS:
                z += tl.load(bias + tl.load(perm + offs_e, mask=me, other=0) * H + h, mask=me, other=0.0)
            e = tl.where(z > 0, z, z * slope)
        e = tl.where(me, e, float("-inf"))
        m_new = tl.maximum(m, tl.max(e, 0))
        scale = tl.exp(m - m_new)
        p = tl.exp(e - m_new)
        l = l * scale + tl.sum(p, 0)
        x_u = tl.load(val + (u[:, None] * H + h) * CV + offs_cv[None, :], mask=me[:, None] & mcv[None, :], other=0.0)
        acc = acc * scale + tl.sum(p[:, None] * x_u, 0)
        m = m_new
    has = end > start
    lse_v = tl.where(has, m + tl.log(l), float("-inf"))
    tl.store(lse + v * H + h, lse_v)
    tl.store(out + (v * H + h) * CV + offs_cv, tl.where(has, acc / l, 0.0), mask=mcv)
    for j0 in range(start, end, BLOCK_E):  # alpha, once lse is known (scores recomputed)
        offs_e = j0 + tl.arange(0, BLOCK_E)
        me = offs_e < end
        u = tl.load(col + offs_e, mask=me, other=0)
        ids = tl.load(perm + offs_e, mask=me, other=0)
        if V2:
            z = tl.load(xs + (u[:, None] * H + h) * C + offs_c[None, :], mask=me[:, None] & mc[None, :],
                        other=0.0) + x_v[None, :]
            e = tl.sum(tl.where(z > 0, z, z * slope) * w[None, :], 1)
        else:
            z = tl.load(xs + u * H + h, mask=me, other=0.0) + t_v
            if HAS_BIAS:
                z += tl.load(bias + ids * H + h, mask=me, other=0.0)
            e = tl.where(z > 0, z, z * slope)
        tl.store(alpha + ids * H + h, tl.exp(e - lse_v), mask=me)


def _backward_dst_kernel(go, ga, xs, xd, att, bias, val, out, lse, crow, col, perm, de_buf, al_buf, d_dst, d_part,
                         H, C, CV, slope_ptr, V2: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_GA: tl.constexpr,
                         BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    v = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    slope = tl.load(slope_ptr)  # a tensor: a Python float would enter as float32
    dt = val.dtype.element_ty
    start = tl.load(crow + v)
    end = tl.load(crow + v + 1)
    offs_c = tl.arange(0, BLOCK_C)
    mc = offs_c < C
    offs_cv = tl.arange(0, BLOCK_CV)
    mcv = offs_cv < CV
    lse_v = tl.load(lse + v * H + h)
    g = tl.load(go + (v * H + h) * CV + offs_cv, mask=mcv, other=0.0)
    delta = tl.sum(g * tl.load(out + (v * H + h) * CV + offs_cv, mask=mcv, other=0.0), 0)
    if V2:
        w = tl.load(att + h * C + offs_c, mask=mc, other=0.0)
        x_v = tl.load(xd + (v * H + h) * C + offs_c, mask=mc, other=0.0)
        acc_dst = tl.zeros([BLOCK_C], dt)
        acc_att = tl.zeros([BLOCK_C], dt)
    else:
        t_v = tl.load(xd + v * H + h)
        acc_t = tl.sum(tl.zeros([BLOCK_E], dt), 0)
    if HAS_GA:  # delta += sum_u alpha_uv grad_alpha_uv: alpha first
        for j0 in range(start, end, BLOCK_E):
            offs_e = j0 + tl.arange(0, BLOCK_E)
            me = offs_e < end
            u = tl.load(col + offs_e, mask=me, other=0)
            ids = tl.load(perm + offs_e, mask=me, other=0)
            if V2:
                z = tl.load(xs + (u[:, None] * H + h) * C + offs_c[None, :], mask=me[:, None] & mc[None, :],
                            other=0.0) + x_v[None, :]
                e = tl.sum(tl.where(z > 0, z, z * slope) * w[None, :], 1)
            else:
                z = tl.load(xs + u * H + h, mask=me, other=0.0) + t_v
                if HAS_BIAS:
                    z += tl.load(bias + ids * H + h, mask=me, other=0.0)
                e = tl.where(z > 0, z, z * slope)
            a = tl.where(me, tl.exp(e - lse_v), 0.0)
            delta += tl.sum(a * tl.load(ga + ids * H + h, mask=me, other=0.0), 0)
    for j0 in range(start, end, BLOCK_E):
        offs_e = j0 + tl.arange(0, BLOCK_E)
        me = offs_e < end
        u = tl.load(col + offs_e, mask=me, other=0)
        ids = tl.load(perm + offs_e, mask=me, other=0)
        if V2:
            z = tl.load(xs + (u[:, None] * H + h) * C + offs_c[None, :], mask=me[:, None] & mc[None, :],
                        other=0.0) + x_v[None, :]
            y = tl.where(z > 0, z, z * slope)
            e = tl.sum(y * w[None, :], 1)
        else:
            z = tl.load(xs + u * H + h, mask=me, other=0.0) + t_v
            if HAS_BIAS:
                z += tl.load(bias + ids * H + h, mask=me, other=0.0)
            e = tl.where(z > 0, z, z * slope)
        a = tl.where(me, tl.exp(e - lse_v), 0.0)
        x_u = tl.load(val + (u[:, None] * H + h) * CV + offs_cv[None, :], mask=me[:, None] & mcv[None, :], other=0.0)
        da = tl.sum(x_u * g[None, :], 1)
        if HAS_GA:
            da += tl.load(ga + ids * H + h, mask=me, other=0.0)
        de = tl.where(me, a * (da - delta), 0.0)
        tl.store(al_buf + ids * H + h, a, mask=me)
        if V2:
            tl.store(de_buf + ids * H + h, de, mask=me)
            acc_dst += tl.sum(de[:, None] * w[None, :] * tl.where(z > 0, 1.0, slope), 0)
            acc_att += tl.sum(de[:, None] * y, 0)
        else:
            dz = de * tl.where(z > 0, 1.0, slope)
            tl.store(de_buf + ids * H + h, dz, mask=me)  # GAT: d z per edge (= d bias)
            acc_t += tl.sum(dz, 0)
    if V2:
        tl.store(d_dst + (v * H + h) * C + offs_c, acc_dst, mask=mc)
        tl.store(d_part + (v * H + h) * C + offs_c, acc_att, mask=mc)
    else:
        tl.store(d_dst + v * H + h, acc_t)


def _backward_src_kernel(go, xs, xd, att, crow_s, col_s, perm_s, de_buf, al_buf, d_src, d_val, H, C, CV, slope_ptr,
                         V2: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    u = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    slope = tl.load(slope_ptr)  # a tensor: a Python float would enter as float32
    dt = go.dtype.element_ty
    start = tl.load(crow_s + u)
    end = tl.load(crow_s + u + 1)
    offs_c = tl.arange(0, BLOCK_C)
    mc = offs_c < C
    offs_cv = tl.arange(0, BLOCK_CV)
    mcv = offs_cv < CV
    acc_val = tl.zeros([BLOCK_CV], dt)
    if V2:
        w = tl.load(att + h * C + offs_c, mask=mc, other=0.0)
        x_u = tl.load(xs + (u * H + h) * C + offs_c, mask=mc, other=0.0)
        acc_src = tl.zeros([BLOCK_C], dt)
    else:
        acc_s = tl.sum(tl.zeros([BLOCK_E], dt), 0)
    for k0 in range(start, end, BLOCK_E):
        offs_k = k0 + tl.arange(0, BLOCK_E)
        mk = offs_k < end
        v = tl.load(col_s + offs_k, mask=mk, other=0)
        ids = tl.load(perm_s + offs_k, mask=mk, other=0)
        a = tl.load(al_buf + ids * H + h, mask=mk, other=0.0)
        d = tl.load(de_buf + ids * H + h, mask=mk, other=0.0)
        g = tl.load(go + (v[:, None] * H + h) * CV + offs_cv[None, :], mask=mk[:, None] & mcv[None, :], other=0.0)
        acc_val += tl.sum(a[:, None] * g, 0)
        if V2:
            z = x_u[None, :] + tl.load(xd + (v[:, None] * H + h) * C + offs_c[None, :],
                                       mask=mk[:, None] & mc[None, :], other=0.0)
            acc_src += tl.sum(d[:, None] * w[None, :] * tl.where(z > 0, 1.0, slope), 0)
        else:
            acc_s += tl.sum(d, 0)
    tl.store(d_val + (u * H + h) * CV + offs_cv, acc_val, mask=mcv)
    if V2:
        tl.store(d_src + (u * H + h) * C + offs_c, acc_src, mask=mc)
    else:
        tl.store(d_src + u * H + h, acc_s)


def _column_sum_kernel(part, total, N, HC, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """``total[k] = sum_n part[n, k]`` in a fixed order (``part``: ``(N, HC)``)."""
    k = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mk = k < HC
    acc = tl.zeros([BLOCK_C], part.dtype.element_ty)
    for n0 in range(0, N, BLOCK_N):
        offs_n = (n0 + tl.arange(0, BLOCK_N)).to(tl.int64)
        acc += tl.sum(tl.load(part + offs_n[:, None] * HC + k[None, :], mask=(offs_n < N)[:, None] & mk[None, :],
                              other=0.0), 0)
    tl.store(total + k, acc, mask=mk)


RAW_KERNELS = {"forward": _forward_kernel, "backward_dst": _backward_dst_kernel,
               "backward_src": _backward_src_kernel, "column_sum": _column_sum_kernel}


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


def _forward(v2: bool, xs: Tensor, xd: Tensor, att: Optional[Tensor], bias: Optional[Tensor], values: Tensor,
             graph: Tuple[Tensor, ...], slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    crow, col, perm = graph[:3]
    xs, xd, att, bias, values = map(_c, (xs, xd, att, bias, values))
    n, h, cv = values.shape
    c = xs.shape[2] if v2 else 1
    out = values.new_empty((n, h, cv))
    alpha = values.new_empty((col.numel(), h))
    lse = values.new_empty((n, h))
    if n and h:
        _kernels_for(values)["forward"][(n, h)](
            xs, xd, att if v2 else xs, bias if bias is not None else xs, values, crow, col, perm, out, alpha, lse,
            h, c, cv, values.new_full((1,), slope), V2=v2, HAS_BIAS=bias is not None, BLOCK_E=BLOCK_E, BLOCK_C=_pow2(c), BLOCK_CV=_pow2(cv))
    return out, alpha, lse


def _backward(v2: bool, grad_out: Tensor, grad_alpha: Optional[Tensor], xs: Tensor, xd: Tensor,
              att: Optional[Tensor], bias: Optional[Tensor], values: Tensor, out: Tensor, lse: Tensor,
              graph: Tuple[Tensor, ...], slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    crow, col, perm, crow_s, col_s, perm_s = graph
    grad_out, grad_alpha, xs, xd, att, bias, values, out, lse = map(
        _c, (grad_out, grad_alpha, xs, xd, att, bias, values, out, lse))
    n, h, cv = values.shape
    c = xs.shape[2] if v2 else 1
    e = col.numel()
    de = values.new_empty((e, h))
    al = values.new_empty((e, h))
    d_src, d_dst, d_val = torch.empty_like(xs), torch.empty_like(xd), torch.empty_like(values)
    part = values.new_empty((n, h, c)) if v2 else values.new_empty(0)
    d_att = torch.zeros_like(att) if v2 else values.new_empty(0)
    if n and h:
        k = _kernels_for(values)
        slope_t = values.new_full((1,), slope)
        blocks = dict(BLOCK_E=BLOCK_E, BLOCK_C=_pow2(c), BLOCK_CV=_pow2(cv))
        k["backward_dst"][(n, h)](
            grad_out, grad_alpha if grad_alpha is not None else grad_out, xs, xd, att if v2 else xs,
            bias if bias is not None else xs, values, out, lse, crow, col, perm, de, al, d_dst, part, h, c, cv, slope_t,
            V2=v2, HAS_BIAS=bias is not None, HAS_GA=grad_alpha is not None, **blocks)
        k["backward_src"][(n, h)](grad_out, xs, xd, att if v2 else xs, crow_s, col_s, perm_s, de, al, d_src, d_val,
                                  h, c, cv, slope_t, V2=v2, **blocks)
        if v2:
            hc = h * c
            block_c = min(64, _pow2(hc))
            k["column_sum"][(triton.cdiv(hc, block_c),)](part, d_att, n, hc, BLOCK_N=BLOCK_N, BLOCK_C=block_c)
    return d_src, d_dst, d_val, (d_att if v2 else de)


@torch.library.custom_op(f"{NS}::gatv2_forward", mutates_args=())
def gatv2_forward(x_src: Tensor, x_dst: Tensor, values: Tensor, att: Tensor, crow: Tensor, col: Tensor, perm: Tensor,
                  crow_s: Tensor, col_s: Tensor, perm_s: Tensor, slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    return _forward(True, x_src, x_dst, att, None, values, (crow, col, perm), slope)


@torch.library.custom_op(f"{NS}::gatv2_backward", mutates_args=())
def gatv2_backward(grad_out: Tensor, grad_alpha: Optional[Tensor], x_src: Tensor, x_dst: Tensor, values: Tensor,
                   att: Tensor, out: Tensor, lse: Tensor, crow: Tensor, col: Tensor, perm: Tensor, crow_s: Tensor,
                   col_s: Tensor, perm_s: Tensor, slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return _backward(True, grad_out, grad_alpha, x_src, x_dst, att, None, values, out, lse,
                     (crow, col, perm, crow_s, col_s, perm_s), slope)


@torch.library.custom_op(f"{NS}::gat_forward", mutates_args=())
def gat_forward(score_src: Tensor, score_dst: Tensor, bias: Optional[Tensor], values: Tensor, crow: Tensor,
                col: Tensor, perm: Tensor, crow_s: Tensor, col_s: Tensor, perm_s: Tensor,
                slope: float) -> Tuple[Tensor, Tensor, Tensor]:
    return _forward(False, score_src, score_dst, None, bias, values, (crow, col, perm), slope)


@torch.library.custom_op(f"{NS}::gat_backward", mutates_args=())
def gat_backward(grad_out: Tensor, grad_alpha: Optional[Tensor], score_src: Tensor, score_dst: Tensor,
                 bias: Optional[Tensor], values: Tensor, out: Tensor, lse: Tensor, crow: Tensor, col: Tensor,
                 perm: Tensor, crow_s: Tensor, col_s: Tensor, perm_s: Tensor,
                 slope: float) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    return _backward(False, grad_out, grad_alpha, score_src, score_dst, None, bias, values, out, lse,
                     (crow, col, perm, crow_s, col_s, perm_s), slope)


rules.register(NS)


def ops() -> Any:
    """The ``torch.ops.zoo_triton`` namespace (same schemas as the C++ ops)."""
    return torch.ops.zoo_triton
