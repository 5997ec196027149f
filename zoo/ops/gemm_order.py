"""A CSR product that gives the bits of the dense BLAS product it replaces.

Stacked replicas each drop their own entries of a bag-of-words input (:mod:`zoo.ops.dropout`), so
their first-layer products ``X_r @ W_r^T`` (and the weight gradients ``X_r^T @ G_r``) were dense
batched products over mostly-zero operands.  ``zoo_kernels.csr_mm_gemm_order``
(``_compiled/cpu/gemm_order.cpp``) sums only the stored entries, in the order of the dense product:
the reduction dimension ``k`` cut into blocks, an FMA chain from zero within a block, the blocks' sums
added in turn.  Where a zero entry's multiply-add leaves the sum unchanged, that is the dense
product's number.  The blocks are the BLAS library's choice, not an interface: :func:`agrees` checks
the kernel against the dense product on this machine, at this shape, once per process, and the
caller keeps the dense product where they differ.
"""
from __future__ import annotations

import functools
from typing import Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import no_vmap_randomness, quiet_sparse

#: the reduction block of MKL's single-threaded AVX-512 sgemm (read from its results: where ``k`` is no
#: multiple of it, the last two blocks share the rest, the first of them the larger half)
BLOCK = 384


@functools.lru_cache(maxsize=None)
def block_starts(k: int, block: int = BLOCK) -> Tensor:
    """The first index of every reduction block after the first, then ``k`` (int64)."""
    count = -(-k // block)
    if count <= 1:
        starts = []
    elif k % block == 0:
        starts = list(range(block, k, block))
    else:  # full blocks, then the rest and one more block split in two, the larger half first
        last_two = (count - 2) * block
        starts = list(range(block, last_two + 1, block)) + [last_two + (k - last_two + 1) // 2]
    return torch.tensor(starts + [k], dtype=torch.long)


def kernel_available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether ``zoo_kernels.csr_mm_gemm_order`` serves (the CPU, float32 / float64, kernels built)."""
    if device.type != "cpu" or dtype not in (torch.float32, torch.float64):
        return False
    from zoo.ops._compiled.build import load_cpu_kernels

    return load_cpu_kernels() and hasattr(torch.ops.zoo_kernels, "csr_mm_gemm_order")


def csr_mm(crow: Tensor, col: Tensor, values: Tensor, dense: Tensor) -> Tensor:
    """Slice ``r`` of the result is ``A_r @ dense[r]`` in the dense product's order, ``A_r`` the
    ``(crow.numel() - 1, k)`` CSR matrix of this structure and the values ``values[r]``.

    Shapes: values ``(R, nnz)``, dense ``(R, k, m)`` -> ``(R, rows, m)``."""
    return torch.ops.zoo_kernels.csr_mm_gemm_order(crow, col, values, dense, block_starts(dense.size(1)))


def _probe_input(n: int, k: int, dtype: torch.dtype, gen: torch.Generator) -> Tensor:
    """An ``(n, k)`` input whose row ``i`` holds entries at columns ``i mod (k-1)``, the next one and one at
    random: every pair of neighbouring columns (and, down a column, of neighbouring rows) meets in some row,
    so a block boundary placed anywhere else changes some sum."""
    rows = torch.arange(n)
    first = rows % max(k - 1, 1)
    x = torch.zeros(n, k, dtype=dtype)
    for cols in (first, (first + 1).clamp_max(k - 1), torch.randint(0, k, (n,), generator=gen)):
        x[rows, cols] = torch.randn(n, generator=gen, dtype=dtype)
    return x


def agrees(n: int, k: int, m: int, dtype: torch.dtype) -> bool:
    """Whether, on this machine and at torch's current thread count, the kernel gives the bits of the
    stacked dense product it replaces: ``vmap(F.linear)`` of an ``(n, k)`` input and an ``(m, k)`` weight,
    and its weight gradient, each a batched product (tried once per shape, dtype and thread count on
    :func:`_probe_input`; costs the two dense products)."""
    # BLAS may split the reduction among threads, so an answer holds for one thread count only
    return _agrees(n, k, m, dtype, torch.get_num_threads())


@functools.lru_cache(maxsize=None)
def _agrees(n: int, k: int, m: int, dtype: torch.dtype, threads: int) -> bool:
    if not kernel_available(torch.device("cpu"), dtype):
        return False
    with no_vmap_randomness(), torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        x = _probe_input(n, k, dtype, gen).unsqueeze(0)
        weight = torch.randn(1, m, k, generator=gen, dtype=dtype)
        grad = torch.randn(1, n, m, generator=gen, dtype=dtype)
        # what vmap(F.linear) and its weight gradient run on stacked operands (a batched product each)
        out = torch.bmm(x, weight.transpose(1, 2))
        weight_grad = torch.bmm(grad.transpose(1, 2), x)
        crow, col, values, crow_t, col_t, values_t = _csr_parts(x[0])
        mine = csr_mm(crow, col, values[None], weight.transpose(1, 2).contiguous())
        mine_grad = csr_mm(crow_t, col_t, values_t[None], grad).transpose(1, 2)
    return torch.equal(out, mine) and torch.equal(weight_grad, mine_grad)


def _csr_parts(x: Tensor) -> Tuple[Tensor, ...]:
    """``x``'s CSR parts and its transpose's: ``(crow, col, values, crow_t, col_t, values_t)``."""
    with quiet_sparse():
        csr = x.to_sparse_csr()
        csc = csr.to_sparse_csc()
    return (csr.crow_indices(), csr.col_indices(), csr.values(),
            csc.ccol_indices(), csc.row_indices(), csc.values())


def serves(n: int, k: int, m: int, dtype: torch.dtype, device: torch.device) -> bool:
    """:func:`agrees` where the kernel can run at all (else False, without trying)."""
    return kernel_available(device, dtype) and agrees(n, k, m, dtype)


#: one replica's CSR matrix: ``(crow, col, values)``, contiguous, int64 indices
Csr = Tuple[Tensor, Tensor, Tensor]


def each_mm(parts: Sequence[Csr], dense: Tensor) -> Tensor:
    """``result[:, r]`` is ``A_r @ dense[r]`` in the dense product's order, ``A_r`` the ``(rows, k)`` CSR
    matrix ``parts[r]`` (each replica its own structure; one may serve several).  The replicas' rows lie
    side by side, as the attention ops take stacked replicas' node features (``(N, R, C)``).

    Shapes: dense ``(R, k, m)`` -> ``(rows, R, m)``."""
    crows, cols, values = (list(t) for t in zip(*parts))
    return torch.ops.zoo_kernels.csr_each_mm_gemm_order(crows, cols, values, dense, block_starts(dense.size(1)))


def each_t_mm(parts: Sequence[Csr], dense: Tensor, k: int) -> Tensor:
    """Slice ``r`` of the result is ``A_r^T @ dense[r]`` in the dense product's order (the reduction over
    ``A_r``'s rows, in blocks), read from ``A_r``'s CSR parts without transposing them, and from ``dense``
    in place (any strides but a unit one along ``m``).

    Shapes: dense ``(R, rows, m)`` -> ``(R, k, m)``."""
    crows, cols, values = (list(t) for t in zip(*parts))
    return torch.ops.zoo_kernels.csr_each_t_mm_gemm_order(crows, cols, values, dense, block_starts(dense.size(1)), k)


def each_kernels_available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether :func:`each_mm` / :func:`each_t_mm` serve (the CPU, float32 / float64, kernels built)."""
    return kernel_available(device, dtype) and hasattr(torch.ops.zoo_kernels, "csr_each_t_mm_gemm_order")


def each_agrees(n: int, k: int, m: int, dtype: torch.dtype) -> bool:
    """Whether, on this machine and at torch's current thread count, :func:`each_mm` and :func:`each_t_mm`
    give the bits of the stacked dense products they replace: ``vmap(F.linear)`` of an ``(n, k)`` input,
    stacked (the replicas' dropped copies) or shared (one input, its batch stride 0), and an ``(m, k)``
    weight, and the weight gradient autograd takes from the stacked one (``x^T @ grad``), each a batched
    product (tried once per shape, dtype and thread count on :func:`_probe_input`)."""
    return _each_agrees(n, k, m, dtype, torch.get_num_threads())


@functools.lru_cache(maxsize=None)
def _each_agrees(n: int, k: int, m: int, dtype: torch.dtype, threads: int) -> bool:
    if not each_kernels_available(torch.device("cpu"), dtype):
        return False
    with no_vmap_randomness(), torch.no_grad():
        gen = torch.Generator().manual_seed(0)
        x = _probe_input(n, k, dtype, gen)
        # three replicas: the kernel takes two rows in turn, and one alone
        weight = torch.randn(3, m, k, generator=gen, dtype=dtype)
        grad = torch.randn(3, n, m, generator=gen, dtype=dtype)
        stacked = x.expand(3, n, k).contiguous()
        # what vmap(F.linear) and its backward run (BmmBackward0's weight gradient: x^T @ grad)
        out = torch.bmm(stacked, weight.transpose(1, 2))
        shared = torch.bmm(x.expand(3, n, k), weight.transpose(1, 2))
        weight_grad = torch.bmm(stacked.transpose(1, 2), grad)
        crow, col, values = _csr_parts(x)[:3]
        parts = [(crow, col, values)] * 3
        mine = each_mm(parts, weight.transpose(1, 2).contiguous()).transpose(0, 1)
        mine_grad = each_t_mm(parts, grad, k)
    return torch.equal(out, mine) and torch.equal(shared, mine) and torch.equal(weight_grad, mine_grad)


def each_serves(n: int, k: int, m: int, dtype: torch.dtype, device: torch.device) -> bool:
    """:func:`each_agrees` where the kernels can run at all (else False, without trying)."""
    return each_kernels_available(device, dtype) and each_agrees(n, k, m, dtype)


__all__ = ["BLOCK", "block_starts", "csr_mm", "agrees", "serves", "kernel_available", "Csr", "each_mm", "each_t_mm",
           "each_kernels_available", "each_agrees", "each_serves"]
