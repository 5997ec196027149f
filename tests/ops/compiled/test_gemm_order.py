"""The CSR product in a dense product's order (``zoo_kernels.csr_mm_gemm_order``): stacked replicas'
first layer on their own dropped copies of a bag-of-words input multiplies only the stored entries,
with the bits of the dense batched product it replaces wherever :func:`zoo.ops.gemm_order.agrees`
found them equal on this machine (else the dense product stays); a GAT / GATv2 first layer's dropped
copies are then not written densely at all."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import vmap

from zoo.ops import gemm_order
from zoo.ops import sparse_linear as sl
from zoo.ops._compiled import ops
from zoo.ops._custom import quiet_sparse
from zoo.models.gat import GATLayer
from zoo.ops.dropout import ReplicaRandomness, dropout, replica_randomness, to_linear_only
from zoo.ops.sparse_input import SparseInput

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ kernels could not be built here (no compiler?)")


def _sparse(reps, rows, cols, density, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(rows, cols, generator=g) < density
    return mask.to(dtype) * torch.rand(reps, rows, cols, generator=g, dtype=dtype)


def test_block_starts():
    """Blocks of 384; a rest shares the last two blocks, the larger half first (Coauthor CS's 6805
    features and 18333 nodes: the boundaries read from MKL's results)."""
    assert gemm_order.block_starts(6805).tolist() == list(range(384, 6145, 384)) + [6475, 6805]
    assert gemm_order.block_starts(18333).tolist()[-3:] == [17664, 17999, 18333]
    assert gemm_order.block_starts(768).tolist() == [384, 768]
    assert gemm_order.block_starts(500).tolist() == [250, 500]
    assert gemm_order.block_starts(100).tolist() == [100]


def _by_hand(x, b, starts):
    """The dense product's order spelt out in float64 (each multiply-add rounded once to x's dtype)."""
    out = torch.zeros(x.size(0), b.size(1), dtype=x.dtype)
    bounds = [0] + starts.tolist()
    for i in range(x.size(0)):
        total = torch.zeros(b.size(1), dtype=x.dtype)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            acc = torch.zeros(b.size(1), dtype=x.dtype)
            for k in (lo + x[i, lo:hi].nonzero().view(-1)).tolist():
                acc = (x[i, k].double() * b[k].double() + acc.double()).to(x.dtype)  # exact product, one rounding
            total = total + acc
        out[i] = total
    return out


@pytest.mark.parametrize("width", [16, 64, 72])
def test_the_kernels_order(width):
    """Every width: below the kernel's 64-column vector block, one block, a block and a tail."""
    x = _sparse(1, 40, 900, 0.05, torch.float32, seed=width)[0]
    x[3] = 0
    b = torch.randn(900, width, generator=torch.Generator().manual_seed(1))
    with quiet_sparse():
        csr = x.to_sparse_csr()
    got = gemm_order.csr_mm(csr.crow_indices(), csr.col_indices(), csr.values()[None], b[None])[0]
    assert torch.equal(got, _by_hand(x, b, gemm_order.block_starts(900)))
    assert torch.equal(got[3], torch.zeros(width))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_the_stacked_dense_product_where_it_agrees(dtype):
    """Forward and weight gradient against the batched products ``vmap(F.linear)`` runs: the same bits
    where :func:`agrees` says so (float32 here, on MKL's AVX-512 path), else equal to rounding."""
    reps, n, k, m = 3, 700, 1000, 72
    x = _sparse(reps, n, k, 0.02, dtype, seed=3)
    w = torch.randn(reps, m, k, dtype=dtype, generator=torch.Generator().manual_seed(2), requires_grad=True)
    grad = torch.randn(reps, n, m, dtype=dtype, generator=torch.Generator().manual_seed(4))
    out = vmap(F.linear)(x, w)
    (w_grad,) = torch.autograd.grad(out, w, grad)
    with quiet_sparse():
        csr, csc = x[0].to_sparse_csr(), x[0].t().contiguous().to_sparse_csr()
    crow, col = csr.crow_indices(), csr.col_indices()
    values = torch.stack([x[r][x[0] != 0] for r in range(reps)])  # x's entries in CSR order
    got = gemm_order.csr_mm(crow, col, values, w.detach().transpose(1, 2).contiguous())
    values_t = torch.stack([x[r].t()[x[0].t() != 0] for r in range(reps)])
    got_grad = gemm_order.csr_mm(csc.crow_indices(), csc.col_indices(), values_t, grad).transpose(1, 2)
    if gemm_order.agrees(n, k, m, dtype):
        assert torch.equal(got, out.detach()) and torch.equal(got_grad, w_grad)
    else:
        torch.testing.assert_close(got, out.detach())
        torch.testing.assert_close(got_grad, w_grad)


def _first_layer(x, w, seeds):
    rng = ReplicaRandomness(seeds)

    def one(weight, token):
        with replica_randomness(rng, token):
            return sl.linear(dropout(x, 0.6, training=True), weight)

    out = vmap(one, randomness="different")(w, rng.tokens(x.device))
    (g,) = torch.autograd.grad(out.square().sum(), w)
    return out, g


def _layer_operands(input_seed, weight_seed):
    """A 1100 x 1000 bag-of-words input (1 % non-zero) and three replicas' 72 x 1000 weights; skips where
    the kernel's order is not this machine's dense product's."""
    if not gemm_order.agrees(1100, 1000, 72, torch.float32):
        pytest.skip("the kernel's order is not this machine's dense product's")
    x = _sparse(1, 1100, 1000, 0.01, torch.float32, seed=input_seed)[0]
    w = torch.randn(3, 72, 1000, generator=torch.Generator().manual_seed(weight_seed), requires_grad=True)
    return x, w


def test_stacked_replicas_multiply_their_dropped_inputs_without_the_zeros(monkeypatch):
    """Stacked replicas on one dropped bag-of-words input: the first layer runs the kernel once for the
    forward and once for the weight gradient, with the numbers of the dense batched product (the
    path before: every replica's dense copy, and a dense product over its zeros)."""
    x, w = _layer_operands(input_seed=7, weight_seed=0)
    calls = []
    real = gemm_order.csr_mm
    monkeypatch.setattr(gemm_order, "csr_mm", lambda *a: calls.append(1) or real(*a))
    out, g = _first_layer(x, w, [3, 1, 4])
    assert len(calls) == 2
    monkeypatch.setattr(gemm_order, "serves", lambda *a: False)
    dense_out, dense_g = _first_layer(x, w, [3, 1, 4])
    assert len(calls) == 2
    assert torch.equal(out, dense_out) and torch.equal(g, dense_g)
    assert g.stride() == dense_g.stride()  # the optimiser sees the gradient's layout unchanged


def _first_layer_promised(x, w, seeds):
    with to_linear_only():
        return _first_layer(x, w, seeds)


def test_a_stack_read_by_linear_alone_is_written_only_where_linear_needs_it(monkeypatch):
    """Under :func:`to_linear_only` the replicas' dropped copies are not written densely where the kernel
    multiplies them, and are written (once, by ``linear``) where the dense product does; the numbers are
    the dense path's either way."""
    x, w = _layer_operands(input_seed=8, weight_seed=1)
    writes = []
    real = SparseInput._write
    monkeypatch.setattr(SparseInput, "_write", lambda self, *a: writes.append(1) or real(self, *a))
    want = _first_layer(x, w, [2, 7, 1])
    assert len(writes) == 1
    got = _first_layer_promised(x, w, [2, 7, 1])
    assert len(writes) == 1  # not written
    monkeypatch.setattr(gemm_order, "serves", lambda *a: False)
    dense = _first_layer_promised(x, w, [2, 7, 1])
    assert len(writes) == 2  # written by linear, for the dense product
    for a, b in zip(got + dense, want + want):
        assert torch.equal(a, b)


class _OwnForward(GATLayer):
    def forward(self, graph, x):
        return super().forward(graph, x)


@pytest.mark.parametrize("case", ["gat", "gatv2", "residual", "degree_block", "hooked", "own_forward"])
def test_which_layers_get_their_input_unwritten(case):
    """Only a layer whose class vouches for its own forward, with nothing else reading its input."""
    import zoo

    kw = dict(in_dim=6, out_dim=3, hidden_dim=8, heads=2, num_layers=2)
    model = zoo.build("gatv2" if case == "gatv2" else "gat", residual="linear" if case == "residual" else "none",
                      layer_degree_onehot=4 if case == "degree_block" else None, **kw)
    layer = model.layers[0]
    if case == "hooked":
        layer.register_forward_pre_hook(lambda module, args: None)
    if case == "own_forward":
        layer.__class__ = _OwnForward
    assert model._input_to_linear_only(layer) == (case in ("gat", "gatv2"))


def test_agreement_is_asked_again_at_another_thread_count(monkeypatch):
    """BLAS may split the reduction among threads: an answer found at one thread count is not reused at another."""
    asked = []
    monkeypatch.setattr(gemm_order, "kernel_available", lambda *a: asked.append(torch.get_num_threads()) and False)
    gemm_order._agrees.cache_clear()
    threads = torch.get_num_threads()
    try:
        gemm_order.agrees(31, 29, 7, torch.float32)
        torch.set_num_threads(threads + 1)
        gemm_order.agrees(31, 29, 7, torch.float32)
    finally:
        torch.set_num_threads(threads)
        gemm_order._agrees.cache_clear()
    assert asked == [threads, threads + 1]
