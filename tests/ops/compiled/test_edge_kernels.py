"""The compiled edge ops without gathered copies (``zoo_kernels.gather_mul``,
``zoo_kernels.neighbour_difference_sum``) give the torch expressions' bits, and serve only where no
gradient is recorded: the SAN scores and the Laplacian energy are the same numbers either way.  The
SAN scores' dot product keeps them with a gradient too (``segment.gathered_dot``: the forward's
product in place, ``zoo_kernels.gathered_dot_backward``), with the bits of the torch ops' autograd,
and so does the nonlocal SAN's ``P^h X`` (``segment.weighted_gather_sum``)."""
from __future__ import annotations

import pytest
import torch

from zoo.diagnostics.oversmoothing import _simple_undirected, laplacian_energy
from zoo.ops import segment
from zoo.ops._compiled import ops

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ kernels could not be built here (no compiler?)")

DTYPES = [torch.float32, torch.float64]


def _graph(n, e, seed, sort=False):
    g = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)
    if sort:
        order = torch.argsort(dst * n + src)
        src, dst = src[order], dst[order]
    return src, dst


def _bits(a, b):
    """The same dtype, shape and bits (NaNs and signed zeros included)."""
    ints = {torch.float32: torch.int32, torch.float64: torch.int64}[a.dtype]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(ints),
                                                                     b.contiguous().view(ints))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(50, 1, 32), (50, 4, 8), (50, 7), (50, 3, 5)])
def test_gather_mul_bitwise(dtype, shape):
    g = torch.Generator().manual_seed(shape[-1])
    a = torch.randn(*shape, generator=g, dtype=dtype)
    b = torch.randn(*shape, generator=g, dtype=dtype)
    src, dst = _graph(shape[0], 400, seed=3)
    got = torch.ops.zoo_kernels.gather_mul(a, dst, b, src)
    assert _bits(got, a.index_select(0, dst) * b.index_select(0, src))
    assert _bits(segment.gathered_product(a, dst, b, src), got)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sort", [False, True])
def test_neighbour_difference_sum_bitwise(dtype, sort):
    """index_add's order: each node's rows added in edge order from zero (a node with no edge: 0)."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(60, 33, generator=g, dtype=dtype) * 1e3
    src, dst = _graph(59, 2000, seed=11, sort=sort)
    want = x.new_zeros(x.shape).index_add(0, dst, x.index_select(0, src) - x.index_select(0, dst))
    got = torch.ops.zoo_kernels.neighbour_difference_sum(x, src, dst, 60)
    assert _bits(got, want)
    assert _bits(segment.neighbour_difference_sum(x, src, dst, 60), want)


def test_kernels_check_indices():
    x = torch.randn(5, 3)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.zoo_kernels.gather_mul(x, torch.tensor([0, 5]), x, torch.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.zoo_kernels.neighbour_difference_sum(x, torch.tensor([0, -1]), torch.tensor([0, 1]), 5)


def test_with_grad_the_torch_ops_and_their_gradient():
    """A tensor that records a gradient takes the torch ops (the kernels have no backward)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(20, 2, 4, generator=g, requires_grad=True)
    b = torch.randn(20, 2, 4, generator=g)
    src, dst = _graph(20, 90, seed=1)
    out = segment.gathered_product(a, dst, b, src)
    out.sum().backward()
    want = torch.zeros_like(a).index_add(0, dst, b.index_select(0, src))
    assert torch.equal(a.grad, want)
    with torch.no_grad():
        assert _bits(segment.gathered_product(a, dst, b, src), out.detach())
    x = torch.randn(20, 3, generator=g, requires_grad=True)
    s = segment.neighbour_difference_sum(x, src, dst, 20)
    assert s.requires_grad
    with torch.no_grad():
        assert _bits(segment.neighbour_difference_sum(x, src, dst, 20), s.detach())


@pytest.mark.parametrize("dtype", DTYPES)
def test_laplacian_energy_as_before(dtype):
    """The energy's numbers are the formula's with the gathered difference and index_add."""
    g = torch.Generator().manual_seed(5)
    n = 80
    edge_index = torch.stack(_graph(n, 600, seed=2))
    x = torch.randn(n, 16, generator=g, dtype=dtype)
    graph = _simple_undirected(edge_index, n)
    diff = x.index_select(0, graph.src) - x.index_select(0, graph.dst)
    summed = x.new_zeros(x.shape).index_add(0, graph.dst, diff)
    mu = x.new_zeros(n).index_add(0, graph.dst, x.new_ones(graph.num_edges)) + 1.0
    delta = summed / mu.unsqueeze(-1)
    want = (mu * delta.pow(2).sum(-1)).sum() / n
    assert _bits(laplacian_energy(edge_index, x), want)


def test_san_scores_same_with_and_without_grad():
    """SAN's dot-product scores: the compiled product in a no-grad forward, the torch ops with grad."""
    from zoo.graph import as_graph
    from zoo.models.transformer import GraphSelfAttention

    torch.manual_seed(0)
    n = 40
    x = torch.randn(n, 16, dtype=torch.float64)
    graph = as_graph(torch.stack(_graph(n, 300, seed=4)), x, "add")
    layer = GraphSelfAttention(16, heads=2).double()
    out, alpha = layer(graph, x)
    with torch.no_grad():
        out2, alpha2 = layer(graph, x)
    assert _bits(alpha2, alpha.detach()) and _bits(out2, out.detach())


def _dot_operands(dtype, heads, channels, seed, grads=(True, True)):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(30, heads, channels, generator=g, dtype=dtype).requires_grad_(grads[0])
    b = torch.randn(25, heads, channels, generator=g, dtype=dtype).requires_grad_(grads[1])
    ia, ib = torch.randint(0, 30, (700,), generator=g), torch.randint(0, 25, (700,), generator=g)
    grad = torch.randn(700, heads, generator=g, dtype=dtype)
    grad[::7] = -0.0  # signed zeros: the sums start from +0 as index_add's
    return a, ia, b, ib, grad


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads, channels", [(1, 32), (2, 16), (3, 5), (8, 8)])
def test_gathered_dot_and_its_gradients_bitwise(dtype, heads, channels):
    """The compiled forward and backward (one pass over the edges, repeated rows included) give the bits
    of ``(a[ia] * b[ib]).sum(-1)`` and its autograd; fails where the torch ops run (the grad_fn)."""
    a, ia, b, ib, grad = _dot_operands(dtype, heads, channels, seed=heads * channels)
    want = (a.index_select(0, ia) * b.index_select(0, ib)).sum(-1)
    want_a, want_b = torch.autograd.grad(want, (a, b), grad)
    got = segment.gathered_dot(a, ia, b, ib)
    assert type(got.grad_fn).__name__ == "_GatheredDotBackward"
    got_a, got_b = torch.autograd.grad(got, (a, b), grad)
    assert _bits(got, want) and _bits(got_a, want_a) and _bits(got_b, want_b)
    with torch.no_grad():
        assert _bits(segment.gathered_dot(a, ia, b, ib), want.detach())


@pytest.mark.parametrize("dtype", DTYPES)
def test_gathered_dot_sums_in_torchs_order_at_every_width(dtype):
    """The one-pass forward (products and torch's summation order) at widths below, at and past the
    vector width, with tails; on this machine's torch some lane count must give float32's SAN width."""
    assert segment._dot_lanes(torch.float32, 32) > 0
    for channels in [1, 2, 3, 5, 8, 12, 16, 17, 31, 32, 33, 40, 64, 70, 100]:
        lanes = segment._dot_lanes(dtype, channels)
        a, ia, b, ib, _ = _dot_operands(dtype, 2, channels, seed=channels, grads=(False, False))
        a[::3, :, ::2] = 0.0  # products of -0 (a zero times a negative): torch's sums start from +0
        a[::4] = -0.0  # rows of -0 products only
        want = (a.index_select(0, ia) * b.index_select(0, ib)).sum(-1)
        if lanes:
            assert _bits(torch.ops.zoo_kernels.gathered_dot(a, ia, b, ib, lanes), want), channels
        assert _bits(segment.gathered_dot(a, ia, b, ib), want), channels


def test_gathered_dot_refuses_a_width_past_its_order():
    a, ia, b, ib, _ = _dot_operands(torch.float32, 1, 130, seed=2, grads=(False, False))
    with pytest.raises(RuntimeError, match="not summed in torch's order"):
        torch.ops.zoo_kernels.gathered_dot(a, ia, b, ib, 2)
    with pytest.raises(RuntimeError, match="not summed in torch's order"):
        torch.ops.zoo_kernels.gathered_dot(a, ia, b, ib, 3)


@pytest.mark.parametrize("grads", [(True, False), (False, True)])
def test_gathered_dot_one_factor_with_a_gradient(grads):
    a, ia, b, ib, grad = _dot_operands(torch.float32, 2, 8, seed=4, grads=grads)
    leaf = a if grads[0] else b
    want = torch.autograd.grad((a.index_select(0, ia) * b.index_select(0, ib)).sum(-1), leaf, grad)[0]
    got = torch.autograd.grad(segment.gathered_dot(a, ia, b, ib), leaf, grad)[0]
    assert _bits(got, want)


def test_gathered_dot_backward_checks_its_operands():
    a, ia, b, ib, grad = _dot_operands(torch.float32, 2, 8, seed=5)
    with pytest.raises(RuntimeError, match="out of range"):
        torch.ops.zoo_kernels.gathered_dot_backward(grad, a.detach(), ia + 30, b.detach(), ib, True, True)
    with pytest.raises(RuntimeError, match=r"\(E, H\)"):
        torch.ops.zoo_kernels.gathered_dot_backward(grad[:, :1], a.detach(), ia, b.detach(), ib, True, True)


def test_san_layer_gradients_as_with_the_torch_ops(monkeypatch):
    """A SAN attention layer's forward and every parameter's gradient: the same bits with the compiled
    score product as with the torch ops."""
    from zoo.graph import as_graph
    from zoo.models.transformer import GraphSelfAttention

    torch.manual_seed(0)
    n = 50
    x = torch.randn(n, 16)
    graph = as_graph(torch.stack(_graph(n, 400, seed=6)), x, "add")
    layer = GraphSelfAttention(16, heads=2)

    def run():
        out, alpha = layer(graph, x)
        grads = torch.autograd.grad(out.square().sum() + alpha.sum(), list(layer.parameters()))
        return [out.detach(), alpha.detach(), *grads]

    got = run()
    monkeypatch.setattr(segment, "_compiled_pair_serves", lambda *args: False)
    want = run()
    assert all(_bits(g, w) for g, w in zip(got, want))


def _weighted_operands(dtype, heads, channels, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(900, heads, generator=g, dtype=dtype).requires_grad_(True)
    x = torch.randn(40, channels, generator=g, dtype=dtype)
    x[::5, ::2] = 0.0  # products of -0 with negative gradients
    x.requires_grad_(True)
    src, dst = _graph(40, 900, seed=seed, sort=True)
    grad = torch.randn(40, heads, channels, generator=g, dtype=dtype)
    return w, x, src, dst, grad


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads, channels", [(1, 32), (1, 5), (1, 17), (1, 64), (2, 16)])
def test_weighted_gather_sum_and_its_gradients_bitwise(dtype, heads, channels):
    """``P^h X`` of the nonlocal factor and its gradients: the bits of the torch expression (its autograd),
    compiled for one head (fails where the torch ops run: the grad_fn), the torch ops for more."""
    w, x, src, dst, grad = _weighted_operands(dtype, heads, channels, seed=channels)
    want = segment.segment_sum(w.unsqueeze(-1) * segment.gather_rows(x, src).unsqueeze(1), dst, 40)
    want_w, want_x = torch.autograd.grad(want, (w, x), grad)
    got = segment.weighted_gather_sum(w, x, src, dst, 40)
    if heads == 1:
        assert type(got.grad_fn).__name__ == "_WeightedGatherSumBackward"
    got_w, got_x = torch.autograd.grad(got, (w, x), grad)
    assert _bits(got, want) and _bits(got_w, want_w) and _bits(got_x, want_x)
    with torch.no_grad():
        assert _bits(segment.weighted_gather_sum(w, x, src, dst, 40), want.detach())


def test_nonlocal_san_layer_as_with_the_torch_ops(monkeypatch):
    """A nonlocal SAN layer's output and every parameter's and the input's gradient: the same bits with the
    compiled edge ops as with the torch ops."""
    from zoo.graph import as_graph
    from zoo.models.transformer import GraphSelfAttention

    torch.manual_seed(0)
    n = 50
    x = torch.randn(n, 16, requires_grad=True)
    graph = as_graph(torch.stack(_graph(n, 400, seed=8)), x.detach(), "add")
    layer = GraphSelfAttention(16, heads=1, nonlocal_energy=True)

    def run():
        out, alpha = layer(graph, x)
        grads = torch.autograd.grad(out.square().sum() + alpha.sum(), [x, *layer.parameters()])
        return [out.detach(), alpha.detach(), *grads]

    got = run()
    monkeypatch.setattr(segment, "_compiled_pair_serves", lambda *args: False)
    want = run()
    assert all(_bits(g, w) for g, w in zip(got, want))
