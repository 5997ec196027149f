"""A moderately sparse constant input (Amazon Computers' bag of words: 35 % non-zero, above the
density where dropout draws at the non-zeros alone) under stacked replicas' first layer: each
replica's dropped copy kept as its own CSR matrix (``zoo_kernels.keep_csr``, the draws of
``keep_mask``), multiplied (``csr_each_mm_gemm_order``) and differentiated
(``csr_each_t_mm_gemm_order``) in the dense batched product's order, the shared undropped input too;
the numbers are the dense path's bitwise wherever :func:`zoo.ops.gemm_order.each_agrees` holds."""
from __future__ import annotations

import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import vmap

from zoo.ops import gemm_order
from zoo.ops import sparse_linear as sl
from zoo.ops._compiled import ops
from zoo.ops._custom import quiet_sparse
from zoo.ops.dropout import ReplicaRandomness, _keep_scale, dropout, replica_randomness, to_linear_only

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ kernels could not be built here (no compiler?)")


def _input(rows, cols, density, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(rows, cols, generator=g) < density).to(dtype) * torch.randn(rows, cols, generator=g, dtype=dtype)


def _csr(x):
    with quiet_sparse():
        csr = x.to_sparse_csr()
    return csr.crow_indices(), csr.col_indices(), csr.values()


@pytest.mark.parametrize("rows,cols,drawn_before", [(7, 5, 0), (300, 77, 623), (400, 767, 1000), (13, 1300, 5)])
def test_keep_csr_keeps_what_keep_mask_keeps(rows, cols, drawn_before):
    """The kept entries and their values are those of ``keep_mask``'s dropped input, and the stream is left
    where ``keep_mask`` leaves it (one word per entry, zeros included), from any position in the twister's
    624-word state."""
    x = _input(rows, cols, 0.35, seed=rows)
    x[1] = 0  # an empty row still draws its words
    scale = _keep_scale(0.6, torch.float32)
    ga, gb = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    torch.rand(drawn_before, generator=ga), torch.rand(drawn_before, generator=gb)
    want = torch.empty_like(x)
    torch.ops.zoo_kernels.keep_mask(want, ga, 0.4, scale, x)
    crow, col, values = torch.ops.zoo_kernels.keep_csr(*_csr(x), gb, 0.4, scale, cols)
    with quiet_sparse():
        got = torch.sparse_csr_tensor(crow, col, values, x.shape).to_dense()
    assert torch.equal(got, want)  # the kept entries; the rest 0 (keep_mask's x * 0, equal as numbers)
    assert int(crow[-1]) == int(torch.count_nonzero(want)) == values.numel()
    assert torch.equal(torch.rand(9, generator=ga), torch.rand(9, generator=gb))


def _parts(stack):
    return [_csr(stack[r]) for r in range(stack.size(0))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [16, 64, 72])
def test_each_products_equal_the_dense_batched_products(dtype, width):
    """Three replicas with their own structures (two rows in turn, one alone; rows of unequal lengths):
    forward (the replicas' rows side by side) and weight gradient against ``torch.bmm`` — bitwise where
    :func:`each_agrees` holds, else to rounding."""
    n, k = 500, 900
    stack = torch.stack([_input(n, k, d, seed=s, dtype=dtype) for s, d in ((1, 0.3), (2, 0.1), (3, 0.45))])
    stack[1, 4] = 0
    gen = torch.Generator().manual_seed(9)
    w = torch.randn(3, width, k, generator=gen, dtype=dtype)
    grad = torch.randn(3, n, width, generator=gen, dtype=dtype)
    got = gemm_order.each_mm(_parts(stack), w.transpose(1, 2).contiguous()).transpose(0, 1)
    got_grad = gemm_order.each_t_mm(_parts(stack), grad, k)
    assert torch.equal(gemm_order.each_t_mm(_parts(stack), grad.transpose(0, 1).contiguous().transpose(0, 1), k),
                       got_grad)  # read in place from another layout
    want, want_grad = torch.bmm(stack, w.transpose(1, 2)), torch.bmm(stack.transpose(1, 2), grad)
    if gemm_order.each_agrees(n, k, width, dtype):
        assert torch.equal(got, want) and torch.equal(got_grad, want_grad)
    else:
        bound = _rounding_bound(stack, w.transpose(1, 2))
        grad_bound = _rounding_bound(stack.transpose(1, 2), grad)
        assert _within(got, want, bound) and _within(got_grad, want_grad, grad_bound)
        # the bound still tells a wrong product: one term left out of one row
        i, j = 0, int(stack[0, 0].abs().argmax())
        wrong = want.clone()
        wrong[0, i] -= stack[0, i, j] * w[0, :, j]
        assert not _within(got, wrong, bound)


def _rounding_bound(a, b):
    """Per entry of ``a @ b`` (batched), how far two summation orders of its ``K`` products may lie
    apart: ``sqrt(K) * eps * (|a| @ |b|)`` — the rounding errors of a K-term sum in another order
    (the kernels' blocks against the BLAS product's) grow like a random walk, ``sqrt(K)`` steps of
    up to ``eps`` times the partial sums, which ``|a| @ |b|`` bounds.  (The worst case, ``K * eps``,
    would let more wrong terms pass; float32's default tolerances, fixed rather than scaled with K
    and the products' magnitudes, fail on some entries where the kernels' order is not BLAS's.)"""
    k = a.size(-1)
    return math.sqrt(k) * torch.finfo(a.dtype).eps * torch.bmm(a.abs(), b.abs())


def _within(got, want, bound):
    return bool(((got - want).abs() <= bound).all())


def _operands(seed):
    """A 1100 x 1000 input (35 % non-zero, above the sparse dropout's density) and three replicas' 64 x 1000
    weights; skips where the kernels' order is not this machine's dense product's."""
    if not gemm_order.each_agrees(1100, 1000, 64, torch.float32):
        pytest.skip("the kernels' order is not this machine's dense product's")
    x = _input(1100, 1000, 0.35, seed=seed).abs()
    w = torch.randn(3, 64, 1000, generator=torch.Generator().manual_seed(seed + 1), requires_grad=True)
    return x, w


def _layer(x, w, seeds, promised, training=True):
    rng = ReplicaRandomness(seeds)

    def one(weight, token):
        with replica_randomness(rng, token), to_linear_only(promised):
            return sl.linear(dropout(x, 0.6, training=training), weight)

    out = vmap(one, randomness="different")(w, rng.tokens(x.device))
    (g,) = torch.autograd.grad(out.square().sum(), w)
    return out, g


def _count(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_promised_first_layer_keeps_the_dropped_copies_as_csr(monkeypatch):
    """Under :func:`to_linear_only` the replicas' dropped copies are drawn as CSR (never written) and
    multiplied by the kernels, forward and weight gradient, with the numbers of the dense path (the path
    before: every replica's dense copy through ``keep_mask``, dense batched products); the gradient's
    layout is the dense path's too."""
    x, w = _operands(seed=4)
    forward, backward = _count(monkeypatch, gemm_order, "each_mm"), _count(monkeypatch, gemm_order, "each_t_mm")
    masks = _count(monkeypatch, torch.ops.zoo_kernels, "keep_mask")
    got = _layer(x, w, [3, 1, 4], promised=True)
    assert (len(forward), len(backward), len(masks)) == (1, 1, 0)
    want = _layer(x, w, [3, 1, 4], promised=False)
    assert len(masks) == 3 and len(forward) == 1
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert got[1].stride() == want[1].stride()


def test_the_stack_is_written_where_the_kernels_disagree(monkeypatch):
    """Where the kernels' order is not the dense product's, ``linear`` writes the dropped copies (the
    numbers ``keep_mask`` writes, signed zeros included) and takes the dense product."""
    x, w = _operands(seed=6)
    x[0, :7] = -x[0, :7]  # negative entries: their dropped copies are -0
    want = _layer(x, w, [2, 7, 1], promised=False)
    monkeypatch.setattr(gemm_order, "each_serves", lambda *a: False)
    dropout_module = importlib.import_module("zoo.ops.dropout")  # the module (zoo.ops.dropout is also a function)
    written = []
    real = dropout_module._write_kept
    monkeypatch.setattr(dropout_module, "_write_kept", lambda *a, **k: written.append(real(*a, **k).clone()) or
                        written[-1])
    got = _layer(x, w, [2, 7, 1], promised=True)
    assert len(written) == 1
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    rng = ReplicaRandomness([2, 7, 1])
    dense = torch.stack([rng.dropped(r, x, 0.6) for r in range(3)])
    assert torch.equal(written[0], dense) and torch.equal(written[0].signbit(), dense.signbit())


def test_shared_input_under_stacked_weights_is_multiplied_as_csr(monkeypatch):
    """The undropped input (evaluation) with the replicas' weights: one CSR form of it serves every
    replica, the numbers those of the dense batched product over the input's expanded copies."""
    x, w = _operands(seed=8)
    forward = _count(monkeypatch, gemm_order, "each_mm")
    got = _layer(x, w, [5, 6, 7], promised=True, training=False)
    assert len(forward) == 1
    monkeypatch.setattr(gemm_order, "each_serves", lambda *a: False)
    want = _layer(x, w, [5, 6, 7], promised=True, training=False)
    assert len(forward) == 1
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("case", ["dense", "non_finite", "small"])
def test_inputs_the_csr_path_leaves_alone(case):
    """Above :data:`EACH_MAX_DENSITY`, with a non-finite entry (a dropped inf is NaN in the dense product),
    or below SPARSE_MIN_ELEMENTS entries: no CSR form."""
    x = _input(1100, 1000, 0.35, seed=1) if case != "small" else _input(100, 100, 0.35, seed=1)
    if case == "dense":
        x = x + 1.0
    if case == "non_finite":
        x[5, 5] = float("inf")
    assert sl.each_parts(x) is None
    assert sl.each_parts(_input(1100, 1000, 0.35, seed=1)) is not None


def test_the_replicas_rows_lie_side_by_side():
    """The stacked result is ``(N, R, C)`` in memory (the attention ops fold the replicas into the heads
    without copying it; the dense batched product's ``(R, N, C)`` needed a copy)."""
    x, w = _operands(seed=10)
    rng, seen = ReplicaRandomness([1, 2, 3]), []

    def one(weight, token):
        with replica_randomness(rng, token), to_linear_only():
            out = sl.linear(dropout(x, 0.6, training=True), weight)
        seen.append(torch._C._functorch.get_unwrapped(out))
        return out

    vmap(one, randomness="different")(w.detach(), rng.tokens(x.device))
    assert seen[0].shape == (1100, 3, 64) and seen[0].is_contiguous()
