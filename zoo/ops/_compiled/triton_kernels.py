r"""The Triton kernels of the fused attention (launched by :mod:`.triton_attention`).

For an edge ``u -> v`` and head ``h`` (one program per row of a degree bucket and head):

.. math::
    e^{\text{GATv2}}_{uv} = a_h^\top \mathrm{LeakyReLU}(x^s_u + x^t_v),\qquad
    e^{\text{GAT}}_{uv} = \mathrm{LeakyReLU}(s_u + t_v\,[+\,b_{uv}]),\qquad
    \alpha_{uv} = \exp(e_{uv} - \mathrm{lse}_v),\qquad h'_v = \sum_u \alpha_{uv}\, x_u

Shapes (replicas folded into the ``H`` heads): x_src, x_dst ``(N, H, C)`` (GAT: s, t ``(N, H)``),
values ``(N, H, CV)``, att ``(H, C)``, bias ``(E, H)``; out ``(N, H, CV)``, alpha ``(E, H)``
(original edge order, through ``perm``), lse ``(N, H)``.

Every phase computes the score with :func:`_edge_score` (one place for the equation):

* forward, by destination: light rows softmax their one block directly; heavy rows run an online
  softmax over blocks and store the raw scores in ``alpha``, which a second sweep turns into
  ``exp(e - lse)`` without recomputing them;
* backward pass A, by destination: ``alpha`` again from the score and the saved ``lse`` (nothing
  edge-sized was kept), ``de = alpha (d alpha - delta)``, the destination-side gradient and a
  per-destination partial of ``d a`` (GATv2; summed by :func:`column_sum_kernel` in a fixed
  order); ``de`` is stored for pass B;
* backward pass B, by source over the reverse CSR: ``d values`` and the source-side gradient.

Offsets are int64 throughout (row ids, CSR positions and edge ids are int64 tensors, program
ids are widened first, and every pointer gets one int64 offset), so ``E``, ``N H C`` beyond
``2^31`` do not overflow; ``tests/ops/compiled/aot_compile.py`` checks the compiled TTIR for it.
No atomics: every output row is written by one program, so the results are deterministic and a
head's numbers do not depend on how many heads (replicas) are folded in.

The kernels are plain functions, wrapped by :func:`.triton_attention.kernels` for the compiler
(CUDA) or Triton's interpreter (CPU tensors, the tests); the helpers are ``@triton.jit`` and
follow ``TRITON_INTERPRET`` like Triton's own standard library.
"""
from __future__ import annotations

import triton
import triton.language as tl


# ---------------------------------------------------------------------------------- helpers
@triton.jit
def _program_row(rows, crow, slope_ptr, C, CV, BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    """What every program starts from: its row ``rows[i]`` (int64) and head ``h``, the LeakyReLU
    slope (a tensor: a Python float would enter as float32), the row's CSR range ``[start, end)``
    and the channel offsets and masks."""
    node = tl.load(rows + tl.program_id(0).to(tl.int64))
    offs_c = tl.arange(0, BLOCK_C)
    offs_cv = tl.arange(0, BLOCK_CV)
    return (node, tl.program_id(1).to(tl.int64), tl.load(slope_ptr), tl.load(crow + node), tl.load(crow + (node + 1)),
            offs_c, offs_c < C, offs_cv, offs_cv < CV)


@triton.jit
def _edge_block(col, perm, j0, end, BLOCK_E: tl.constexpr):
    """Edges ``j0 .. j0 + BLOCK_E`` of a CSR row ending at ``end``: mask, neighbours, edge ids."""
    offs = j0 + tl.arange(0, BLOCK_E)
    me = offs < end
    return me, tl.load(col + offs, mask=me, other=0), tl.load(perm + offs, mask=me, other=0)


@triton.jit
def _row(ptr, node, h, H, width, offs, mask):
    """Row ``(node, h)`` of an ``(N, H, width)`` tensor."""
    return tl.load(ptr + ((node * H + h) * width + offs), mask=mask, other=0.0)


@triton.jit
def _rows(ptr, nodes, me, h, H, width, offs, mask):
    """Rows ``(nodes[i], h)`` of an ``(N, H, width)`` tensor: ``(BLOCK_E, BLOCK)``."""
    return tl.load(ptr + ((nodes[:, None] * H + h) * width + offs[None, :]), mask=me[:, None] & mask[None, :],
                   other=0.0)


@triton.jit
def _node_terms(x, att, node, h, H, C, offs_c, mc, V2: tl.constexpr):
    """The fixed node's share of its edges' scores: GATv2 its ``(C,)`` row and ``a_h``; GAT its
    scalar (and ``att`` unused: the scalar again, a placeholder of the same dtype)."""
    if V2:
        own = _row(x, node, h, H, C, offs_c, mc)
        w = tl.load(att + (h * C + offs_c), mask=mc, other=0.0)
    else:
        own = tl.load(x + (node * H + h))
        w = own
    return own, w


@triton.jit
def _edge_score(gathered, own, w, bias, nbr, ids, me, h, H, C, slope, offs_c, mc, V2: tl.constexpr,
                HAS_BIAS: tl.constexpr):
    """Scores of a block of edges between one node (``own``, ``w``: :func:`_node_terms`) and its
    neighbours ``nbr`` (terms read from ``gathered``): ``(e, z, LeakyReLU(z))``, ``z`` the
    pre-activation — ``(BLOCK_E, BLOCK_C)`` for GATv2, ``(BLOCK_E,)`` for GAT.

    By destination ``gathered`` holds the sources' terms and ``own`` the destination's; pass B
    swaps them: ``x_u + x_v`` is the same float either way (addition commutes exactly)."""
    if V2:
        z = _rows(gathered, nbr, me, h, H, C, offs_c, mc) + own[None, :]
        y = tl.where(z > 0, z, z * slope)
        e = tl.sum(y * w[None, :], 1)
    else:
        z = tl.load(gathered + (nbr * H + h), mask=me, other=0.0) + own
        if HAS_BIAS:
            z += tl.load(bias + (ids * H + h), mask=me, other=0.0)
        y = tl.where(z > 0, z, z * slope)
        e = y
    return e, z, y


@triton.jit
def _dst_grads(a, ga, z, y, delta, g, w, val, de_buf, u, ids, me, h, H, CV, slope, offs_cv, mcv,
               V2: tl.constexpr, HAS_GA: tl.constexpr):
    """Pass A on a block of a destination's edges: stores ``d e`` (GATv2) or ``d z`` (GAT: also
    ``d bias``) per edge; returns this block's share of ``d x_dst`` and of ``d a`` (GATv2)."""
    da = tl.sum(_rows(val, u, me, h, H, CV, offs_cv, mcv) * g[None, :], 1)
    if HAS_GA:
        da += tl.load(ga + (ids * H + h), mask=me, other=0.0)
    de = tl.where(me, a * (da - delta), 0.0)
    dleaky = tl.where(z > 0, 1.0, slope)
    if V2:
        d_edge = de
        part_dst = tl.sum(de[:, None] * w[None, :] * dleaky, 0)
        part_att = tl.sum(de[:, None] * y, 0)
    else:
        d_edge = de * dleaky
        part_dst = tl.sum(d_edge, 0)
        part_att = part_dst  # GAT has no attention vector here: unused
    tl.store(de_buf + (ids * H + h), d_edge, mask=me)
    return part_dst, part_att


@triton.jit
def _src_grads(go, xd, own, w, bias, lse, de_buf, v, ids, me, h, H, C, CV, slope, offs_c, mc, offs_cv, mcv,
               V2: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Pass B on a block of a source's edges: its share of ``d values`` and of the source-side
    gradient.  ``alpha`` is recomputed here, by source: pass A computed it by destination, and
    keeping it for the reverse order would cost an ``(E, H)`` buffer written and read again."""
    e, z, _y = _edge_score(xd, own, w, bias, v, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
    a = tl.where(me, tl.exp(e - tl.load(lse + (v * H + h), mask=me, other=0.0)), 0.0)
    d = tl.load(de_buf + (ids * H + h), mask=me, other=0.0)
    part_val = tl.sum(a[:, None] * _rows(go, v, me, h, H, CV, offs_cv, mcv), 0)
    if V2:
        part_src = tl.sum(d[:, None] * w[None, :] * tl.where(z > 0, 1.0, slope), 0)
    else:
        part_src = tl.sum(d, 0)
    return part_val, part_src


# ---------------------------------------------------------------------------------- kernels
def forward_kernel(rows, xs, xd, att, bias, val, crow, col, perm, out, alpha, lse, H, C, CV, slope_ptr,
                   V2: tl.constexpr, HAS_BIAS: tl.constexpr, LIGHT: tl.constexpr, BLOCK_E: tl.constexpr,
                   BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    """Program ``(i, h)``: destination ``rows[i]``, head ``h``: ``out``, ``lse`` and ``alpha``."""
    v, h, slope, start, end, offs_c, mc, offs_cv, mcv = _program_row(rows, crow, slope_ptr, C, CV, BLOCK_C, BLOCK_CV)
    own, w = _node_terms(xd, att, v, h, H, C, offs_c, mc, V2)
    if LIGHT:  # the whole row in one block (or none): a plain softmax
        has = end > start
        me, u, ids = _edge_block(col, perm, start, end, BLOCK_E)
        e, _z, _y = _edge_score(xs, own, w, bias, u, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
        m = tl.where(has, tl.max(tl.where(me, e, float("-inf")), 0), 0.0)
        p = tl.where(me, tl.exp(e - m), 0.0)
        l = tl.where(has, tl.sum(p, 0), 1.0)
        acc = tl.sum(p[:, None] * _rows(val, u, me, h, H, CV, offs_cv, mcv), 0)
        lse_v = tl.where(has, m + tl.log(l), float("-inf"))
        # exp(e - lse), not p / l: the backward recomputes alpha by this formula, to the bit
        tl.store(alpha + (ids * H + h), tl.exp(e - lse_v), mask=me)
    else:  # online softmax over blocks; the raw scores wait in alpha until lse is known
        m = tl.max(tl.full([BLOCK_E], float("-inf"), val.dtype.element_ty), 0)
        l = tl.sum(tl.zeros([BLOCK_E], val.dtype.element_ty), 0)
        acc = tl.zeros([BLOCK_CV], val.dtype.element_ty)
        for j0 in range(start, end, BLOCK_E):
            me, u, ids = _edge_block(col, perm, j0, end, BLOCK_E)
            e, _z, _y = _edge_score(xs, own, w, bias, u, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
            e = tl.where(me, e, float("-inf"))
            tl.store(alpha + (ids * H + h), e, mask=me)
            m_new = tl.maximum(m, tl.max(e, 0))
            scale = tl.exp(m - m_new)
            p = tl.exp(e - m_new)
            l = l * scale + tl.sum(p, 0)
            acc = acc * scale + tl.sum(p[:, None] * _rows(val, u, me, h, H, CV, offs_cv, mcv), 0)
            m = m_new
        lse_v = m + tl.log(l)  # a heavy row is never empty
        tl.debug_barrier()  # the scores stored above, visible to every thread of the program
        for j0 in range(start, end, BLOCK_E):
            offs = j0 + tl.arange(0, BLOCK_E)
            me = offs < end
            at = alpha + (tl.load(perm + offs, mask=me, other=0) * H + h)
            tl.store(at, tl.exp(tl.load(at, mask=me, other=0.0) - lse_v), mask=me)
    tl.store(lse + (v * H + h), lse_v)
    tl.store(out + ((v * H + h) * CV + offs_cv), acc / l, mask=mcv)


def backward_dst_kernel(rows, go, ga, xs, xd, att, bias, val, out, lse, crow, col, perm, de_buf, d_dst, d_part,
                        H, C, CV, slope_ptr, V2: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_GA: tl.constexpr,
                        LIGHT: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    """Pass A, program ``(i, h)``: destination ``rows[i]``: ``de`` per edge, ``d x_dst`` and the
    destination's partial of ``d a`` (GATv2)."""
    v, h, slope, start, end, offs_c, mc, offs_cv, mcv = _program_row(rows, crow, slope_ptr, C, CV, BLOCK_C, BLOCK_CV)
    lse_v = tl.load(lse + (v * H + h))
    g = _row(go, v, h, H, CV, offs_cv, mcv)
    delta = tl.sum(g * _row(out, v, h, H, CV, offs_cv, mcv), 0)
    own, w = _node_terms(xd, att, v, h, H, C, offs_c, mc, V2)
    if V2:
        acc_dst = tl.zeros([BLOCK_C], val.dtype.element_ty)
        acc_att = tl.zeros([BLOCK_C], val.dtype.element_ty)
    else:
        acc_dst = tl.sum(tl.zeros([BLOCK_E], val.dtype.element_ty), 0)
        acc_att = acc_dst
    if LIGHT:  # one block: alpha once, delta completed before de needs it
        me, u, ids = _edge_block(col, perm, start, end, BLOCK_E)
        e, z, y = _edge_score(xs, own, w, bias, u, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
        a = tl.where(me, tl.exp(e - lse_v), 0.0)
        if HAS_GA:  # delta += sum_u alpha_uv grad_alpha_uv
            delta += tl.sum(a * tl.load(ga + (ids * H + h), mask=me, other=0.0), 0)
        acc_dst, acc_att = _dst_grads(a, ga, z, y, delta, g, w, val, de_buf, u, ids, me, h, H, CV, slope, offs_cv,
                                      mcv, V2, HAS_GA)
    else:
        if HAS_GA:  # delta needs the whole row before any de: a heavy row is swept twice
            for j0 in range(start, end, BLOCK_E):
                me, u, ids = _edge_block(col, perm, j0, end, BLOCK_E)
                e, _z, _y = _edge_score(xs, own, w, bias, u, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
                a = tl.where(me, tl.exp(e - lse_v), 0.0)
                delta += tl.sum(a * tl.load(ga + (ids * H + h), mask=me, other=0.0), 0)
        for j0 in range(start, end, BLOCK_E):
            me, u, ids = _edge_block(col, perm, j0, end, BLOCK_E)
            e, z, y = _edge_score(xs, own, w, bias, u, ids, me, h, H, C, slope, offs_c, mc, V2, HAS_BIAS)
            a = tl.where(me, tl.exp(e - lse_v), 0.0)
            part_dst, part_att = _dst_grads(a, ga, z, y, delta, g, w, val, de_buf, u, ids, me, h, H, CV, slope,
                                            offs_cv, mcv, V2, HAS_GA)
            acc_dst += part_dst
            acc_att += part_att
    if V2:
        tl.store(d_dst + ((v * H + h) * C + offs_c), acc_dst, mask=mc)
        tl.store(d_part + ((v * H + h) * C + offs_c), acc_att, mask=mc)
    else:
        tl.store(d_dst + (v * H + h), acc_dst)


def backward_src_kernel(rows, go, xs, xd, att, bias, lse, crow_s, col_s, perm_s, de_buf, d_src, d_val, H, C, CV,
                        slope_ptr, V2: tl.constexpr, HAS_BIAS: tl.constexpr, LIGHT: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_CV: tl.constexpr):
    """Pass B, program ``(i, h)``: source ``rows[i]`` over the reverse CSR: ``d values`` and the
    source-side gradient."""
    u, h, slope, start, end, offs_c, mc, offs_cv, mcv = _program_row(rows, crow_s, slope_ptr, C, CV, BLOCK_C, BLOCK_CV)
    own, w = _node_terms(xs, att, u, h, H, C, offs_c, mc, V2)
    if LIGHT:
        me, v, ids = _edge_block(col_s, perm_s, start, end, BLOCK_E)
        acc_val, acc_src = _src_grads(go, xd, own, w, bias, lse, de_buf, v, ids, me, h, H, C, CV, slope, offs_c, mc,
                                      offs_cv, mcv, V2, HAS_BIAS)
    else:
        acc_val = tl.zeros([BLOCK_CV], go.dtype.element_ty)
        if V2:
            acc_src = tl.zeros([BLOCK_C], go.dtype.element_ty)
        else:
            acc_src = tl.sum(tl.zeros([BLOCK_E], go.dtype.element_ty), 0)
        for k0 in range(start, end, BLOCK_E):
            me, v, ids = _edge_block(col_s, perm_s, k0, end, BLOCK_E)
            part_val, part_src = _src_grads(go, xd, own, w, bias, lse, de_buf, v, ids, me, h, H, C, CV, slope,
                                            offs_c, mc, offs_cv, mcv, V2, HAS_BIAS)
            acc_val += part_val
            acc_src += part_src
    tl.store(d_val + ((u * H + h) * CV + offs_cv), acc_val, mask=mcv)
    if V2:
        tl.store(d_src + ((u * H + h) * C + offs_c), acc_src, mask=mc)
    else:
        tl.store(d_src + (u * H + h), acc_src)


def column_sum_kernel(part, total, N, HC, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """``total[k] = sum_n part[n, k]`` in a fixed order (``part``: ``(N, HC)``)."""
    k = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mk = k < HC
    acc = tl.zeros([BLOCK_C], part.dtype.element_ty)
    for n0 in range(0, N, BLOCK_N):
        offs_n = (n0 + tl.arange(0, BLOCK_N)).to(tl.int64)
        acc += tl.sum(tl.load(part + (offs_n[:, None] * HC + k[None, :]), mask=(offs_n < N)[:, None] & mk[None, :],
                              other=0.0), 0)
    tl.store(total + k, acc, mask=mk)


RAW_KERNELS = {"forward": forward_kernel, "backward_dst": backward_dst_kernel,
               "backward_src": backward_src_kernel, "column_sum": column_sum_kernel}
