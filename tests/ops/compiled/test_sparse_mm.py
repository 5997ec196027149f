"""The compiled CSR product (``zoo_kernels.csr_mm``, the first layer's product with sparse input
features) sums each output row over its stored entries in turn, each product rounded first: the same
bits on every CPU.  ``torch.sparse.mm`` (MKL) sums in that order on some CPUs (the AVX2 machines the
records were made on) and not on others (MKL's AVX-512 path): there the kernel is bitwise
``torch.sparse.mm``, elsewhere close to it; ``_same_as_torch`` asserts whichever holds here."""
from __future__ import annotations

import warnings

import pytest
import torch

from zoo.ops import csr
from zoo.ops import sparse_linear as sl
from zoo.ops._compiled import ops

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ kernels could not be built here (no compiler?)")


def _sparse(rows, cols, density, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(rows, cols, generator=g) < density
    return mask.to(dtype) * torch.rand(rows, cols, generator=g, dtype=dtype)


def _csr(a):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return a.to_sparse_csr()


def _torch_sums_in_order() -> bool:
    """Whether this machine's ``torch.sparse.mm`` sums each row's entries in turn, no fused
    multiply-add (then the kernel must equal it bit for bit)."""
    a = _csr(_sparse(60, 90, 0.2, torch.float32, seed=11))
    b = torch.randn(90, 33, generator=torch.Generator().manual_seed(5))
    return torch.equal(torch.sparse.mm(a, b), _in_order(a, b))


def _same_as_torch(got, want):
    """Bitwise where torch sums in the kernel's order, else equal within float rounding."""
    if _torch_sums_in_order():
        assert got.shape == want.shape and torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [1, 5, 64, 75, 200])
def test_the_kernels_order_and_torch_sparse_mm(dtype, width):
    """Every width: a multiple of the kernel's column block, less than one, a block and a tail;
    rows with no entry (an all-zero row of the input) come out zero."""
    a = _sparse(90, 130, 0.08, dtype, seed=width)
    a[3] = 0
    b = torch.randn(130, width, generator=torch.Generator().manual_seed(1), dtype=dtype)
    csr = _csr(a)
    got = torch.ops.zoo_kernels.csr_mm(csr.crow_indices(), csr.col_indices(), csr.values(), b)
    assert torch.equal(got, _in_order(csr, b))
    _same_as_torch(got, torch.sparse.mm(csr, b))
    assert not got[3].any()


def test_a_stack_multiplies_each_slice_alone(monkeypatch):
    """``(R, k, m)`` -> ``(R, n, m)``: each slice the product alone (GCN's propagation of stacked
    replicas), as ``torch.mm`` of that slice, which the fallback computes."""
    a = _sparse(50, 50, 0.1, torch.float32, seed=4)
    x = torch.randn(3, 50, 70, generator=torch.Generator().manual_seed(2))
    parts = (_csr(a).crow_indices(), _csr(a).col_indices(), _csr(a).values(), 50)
    got = csr.csr_mm(*parts, x)
    assert got.shape == (3, 50, 70)
    for r in range(3):
        assert torch.equal(got[r], _in_order(_csr(a), x[r]))
        _same_as_torch(got[r], torch.mm(_csr(a), x[r]))
    monkeypatch.setattr(csr, "compiled_csr_mm", lambda device, dtype: None)
    _same_as_torch(got, csr.csr_mm(*parts, x))


def test_strided_dense_is_read_as_its_values():
    a = _sparse(40, 70, 0.1, torch.float32, seed=3)
    b = torch.randn(96, 70)  # read transposed: (70, 96) with strides (1, 70)
    csr = _csr(a)
    got = torch.ops.zoo_kernels.csr_mm(csr.crow_indices(), csr.col_indices(), csr.values(), b.t())
    assert torch.equal(got, _in_order(csr, b.t().contiguous()))


def test_first_layer_uses_the_kernel_and_keeps_the_bits(monkeypatch):
    """``sparse_linear.linear`` on stacked weights (forward and weight gradient) runs the compiled
    kernel, with the numbers of the ``torch.sparse.mm`` path it replaces (bitwise where torch sums
    in the kernel's order)."""
    monkeypatch.setattr(sl, "SPARSE_MIN_ELEMENTS", 0)
    x = _sparse(120, 200, 0.03, torch.float32, seed=7)
    assert sl._SPARSE.get(x) is not None  # sparse enough for the CSR path
    w = torch.randn(3, 16, 200, generator=torch.Generator().manual_seed(2), requires_grad=True)

    def run():
        out = torch.func.vmap(sl.linear, in_dims=(None, 0))(x, w)
        return out, torch.autograd.grad(out.square().sum(), w)[0]

    calls = []
    kernel = torch.ops.zoo_kernels.csr_mm
    monkeypatch.setattr(csr, "compiled_csr_mm", lambda device, dtype: lambda *a: calls.append(1) or kernel(*a))
    out, grad = run()
    assert len(calls) == 2  # forward and weight gradient
    monkeypatch.setattr(csr, "compiled_csr_mm", lambda device, dtype: None)  # torch.sparse.mm
    ref_out, ref_grad = run()
    _same_as_torch(out, ref_out)
    _same_as_torch(grad, ref_grad)


def _in_order(csr_matrix, b):
    """Each output row summed over its stored entries in order, each product rounded first (the
    kernel's documented order, whatever its vector width)."""
    crow, col, val = csr_matrix.crow_indices(), csr_matrix.col_indices(), csr_matrix.values()
    out = torch.zeros(crow.numel() - 1, b.shape[1], dtype=b.dtype)
    for i in range(crow.numel() - 1):
        for k in range(int(crow[i]), int(crow[i + 1])):
            out[i] = out[i] + val[k] * b[col[k]]
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_order_is_each_rows_entries_in_turn_at_every_width(dtype):
    """Blocks of 256 bytes (4 AVX-512 or 8 AVX2 vectors, by the CPU), the columns left over in blocks
    of 4, 2 and 1 vectors, the last ones short of a vector one by one (every combination of these at
    8 or 16 lanes among the widths): every column's sum is the sequential one, so the vector width
    changes no bit."""
    a = _sparse(40, 70, 0.15, dtype, seed=3)
    csr_a = _csr(a)
    for width in (1, 7, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 96, 112, 120, 130, 200, 250):
        b = torch.randn(70, width, generator=torch.Generator().manual_seed(width), dtype=dtype)
        got = torch.ops.zoo_kernels.csr_mm(csr_a.crow_indices(), csr_a.col_indices(), csr_a.values(), b)
        assert torch.equal(got, _in_order(csr_a, b)), width


def _with_specials(x):
    """``x`` with zeros, a NaN and an infinity at fixed places (the ReLU's edge cases)."""
    x = x.clone()
    flat = x.view(-1)
    flat[::7] = 0.0
    flat[3] = float("nan")
    flat[11] = float("inf")
    flat[12] = -float("inf")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [5, 32, 48, 64, 75, 200])
def test_fused_relu_and_gate_are_the_separate_ops_bitwise(dtype, width):
    """``relu``: ``torch.relu`` of the product (negative sums 0, NaN kept); ``gate``: the product of
    ``threshold_backward(b, gate, 0)`` (b where gate > 0, NaN in the gate passes b); both at once;
    stacked; blocks and tails; and the fallback (no kernel) gives the same."""
    a = _sparse(90, 130, 0.08, dtype, seed=width)
    a[3] = 0
    g = torch.Generator().manual_seed(width + 1)
    b = _with_specials(torch.randn(2, 130, width, generator=g, dtype=dtype))
    gate = _with_specials(torch.randn(2, 130, width, generator=g, dtype=dtype))
    c = _csr(a)
    parts = (c.crow_indices(), c.col_indices(), c.values())
    plain = torch.ops.zoo_kernels.csr_mm(*parts, b)
    masked = torch.ops.aten.threshold_backward(b, gate, 0)
    cases = {(None, False): plain, (None, True): torch.relu(plain),
             (gate, False): torch.ops.zoo_kernels.csr_mm(*parts, masked),
             (gate, True): torch.relu(torch.ops.zoo_kernels.csr_mm(*parts, masked))}
    for (gt, relu), want in cases.items():
        got = torch.ops.zoo_kernels.csr_mm(*parts, b, gt, relu)
        assert torch.equal(got.nan_to_num(1.5), want.nan_to_num(1.5)), (gt is not None, relu)
        assert torch.equal(got.isnan(), want.isnan())
        for r in range(2):  # each slice alone
            alone = torch.ops.zoo_kernels.csr_mm(*parts, b[r], None if gt is None else gt[r], relu)
            assert torch.equal(alone.nan_to_num(1.5), got[r].nan_to_num(1.5))


def test_fused_relu_and_gate_fallback_matches(monkeypatch):
    """Without the kernel (torch.sparse.mm): the same numbers as the kernel's fused ops."""
    a = _sparse(60, 80, 0.1, torch.float32, seed=9)
    g = torch.Generator().manual_seed(3)
    b = torch.randn(3, 80, 40, generator=g)
    gate = torch.randn(3, 80, 40, generator=g)
    c = _csr(a)
    parts = (c.crow_indices(), c.col_indices(), c.values(), 80)
    fused = csr.csr_mm(*parts, b, gate, True)
    monkeypatch.setattr(csr, "compiled_csr_mm", lambda device, dtype: None)
    _same_as_torch(fused, csr.csr_mm(*parts, b, gate, True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("replicas,width", [(15, 64), (2, 5), (3, 70), (1, 200)])
def test_the_product_folded_into_an_sgd_step_is_the_product_then_addcmul(dtype, replicas, width):
    """``csr_mm_sgd_``: param -= rate * (A @ B) as ``csr_mm`` then torch's ``addcmul_`` on the stacked
    parameter, where torch's kernel rounds as it does (one fused multiply-add; else it is not used)."""
    if not sl._fused_step_agrees(dtype, width):
        pytest.skip("torch's addcmul_ does not round as one fused multiply-add here")
    a = _sparse(37, 23, 0.2, dtype, seed=width)  # A = X^T (features x nodes)
    csr_a = _csr(a)
    crow, col, val = csr_a.crow_indices(), csr_a.col_indices(), csr_a.values()
    gen = torch.Generator().manual_seed(replicas)
    grad = torch.randn(23, replicas * width, generator=gen, dtype=dtype)
    param = torch.randn(37, replicas * width, generator=gen, dtype=dtype)
    rate = torch.linspace(0.01, 0.9, replicas, dtype=torch.float64).to(dtype)
    want = param.clone()
    stacked = want.view(37, replicas, width).permute(1, 2, 0)  # (R, C, F) stored as (F, R*C), as the weight
    stacked.addcmul_(rate.view(-1, 1, 1), torch.ops.zoo_kernels.csr_mm(crow, col, val, grad, None, False)
                     .view(37, replicas, width).permute(1, 2, 0), value=-1)
    torch.ops.zoo_kernels.csr_mm_sgd_(crow, col, val, grad, param, rate, width)
    assert torch.equal(param, want)
