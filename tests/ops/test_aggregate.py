"""The fused edge softmax + aggregation equals the plain ops to 1e-10 at float64: values and gradients,
with and without vmap, on the awkward graph (isolated node, self-loop, duplicate edge)."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

from tests.conftest import awkward_graph, record_calls, seeded_double_models, training_outputs_and_grads
from zoo.ops import fused as fused_kernels
from zoo.ops.aggregate import edge_attention
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum

# the torch-op kernels (the dispatch would otherwise prefer the compiled attention)
pytestmark = pytest.mark.usefixtures("torch_op_kernels")

TOL = dict(rtol=0, atol=1e-10)


def plain(scores, x, src, dst, n):
    alpha = segment_softmax(scores, dst, n)
    return segment_sum(alpha.unsqueeze(-1) * gather_rows(x, src), dst, n), alpha


def _data(replicas=None, heads=2, channels=3, seed=0):
    edge_index, n = awkward_graph()
    g = torch.Generator().manual_seed(seed)
    lead = () if replicas is None else (replicas,)
    e = edge_index.size(1)
    scores = torch.randn(*lead, e, heads, generator=g, dtype=torch.float64).mul_(3).requires_grad_()
    x = torch.randn(*lead, n, heads, channels, generator=g, dtype=torch.float64, requires_grad=True)
    return scores, x, edge_index[0], edge_index[1], n


def _check(f_fused, f_plain, scores, x):
    out, alpha = f_fused(scores, x)
    ref_out, ref_alpha = f_plain(scores, x)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(alpha, ref_alpha, **TOL)
    g = torch.Generator().manual_seed(1)
    w_out = torch.randn(out.shape, generator=g, dtype=out.dtype)
    w_alpha = torch.randn(alpha.shape, generator=g, dtype=alpha.dtype)
    # the loss uses alpha too (the layers return it): both outputs' gradients flow back
    grads = torch.autograd.grad((out * w_out).sum() + (alpha * w_alpha).sum(), (scores, x), retain_graph=True)
    ref = torch.autograd.grad((ref_out * w_out).sum() + (ref_alpha * w_alpha).sum(), (scores, x),
                              retain_graph=True)
    for a, b in zip(grads, ref):
        torch.testing.assert_close(a, b, **TOL)
    # output gradient only (alpha unused: its gradient arrives as None)
    grads = torch.autograd.grad((out * w_out).sum(), (scores, x))
    ref = torch.autograd.grad((ref_out * w_out).sum(), (scores, x))
    for a, b in zip(grads, ref):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("heads", [1, 2])
def test_fused_equals_plain_without_vmap(heads):
    scores, x, src, dst, n = _data(heads=heads)
    _check(lambda s, v: edge_attention(s, v, src, dst, n), lambda s, v: plain(s, v, src, dst, n), scores, x)
    out, _ = edge_attention(scores, x, src, dst, n)
    assert out[6].abs().max() == 0  # the isolated node receives nothing


def test_fused_equals_plain_under_vmap():
    scores, x, src, dst, n = _data(replicas=3)
    _check(vmap(lambda s, v: edge_attention(s, v, src, dst, n)), vmap(lambda s, v: plain(s, v, src, dst, n)),
           scores, x)


def test_fused_under_vmap_with_shared_values():
    """One input batched, the other shared by all replicas (in_dims None)."""
    scores, x, src, dst, n = _data(replicas=4)
    x1 = x[0].detach().requires_grad_()
    out = vmap(lambda s: edge_attention(s, x1, src, dst, n)[0])(scores)
    ref = vmap(lambda s: plain(s, x1, src, dst, n)[0])(scores)
    torch.testing.assert_close(out, ref, **TOL)
    w = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad((out * w).sum(), (scores, x1)),
                    torch.autograd.grad((ref * w).sum(), (scores, x1))):
        torch.testing.assert_close(a, b, **TOL)


def test_fused_equals_plain_with_huge_scores():
    scores, x, src, dst, n = _data()
    with torch.no_grad():
        scores[:3] += 1e4
    _check(lambda s, v: edge_attention(s, v, src, dst, n), lambda s, v: plain(s, v, src, dst, n), scores, x)


@pytest.mark.parametrize("name", ["gat", "gatv2"])
def test_layers_fused_equal_plain_with_and_without_vmap(name, monkeypatch):
    """Whole models at float64: the fused aggregation gives the plain path's outputs and gradients."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models(name, heads=2)

    def run(enabled):
        calls = record_calls(monkeypatch, "zoo.ops.dispatch.edge_attention")
        with fused_kernels(["score", "aggregate"] if enabled else ["score"], min_elements=0):  # the graph is tiny
            out = training_outputs_and_grads(models, edge_index, x)
        assert bool(calls) == enabled  # the fused path is (or is not) the one taken
        return out

    for a, b in zip(run(True), run(False)):
        torch.testing.assert_close(a, b, **TOL)


def _keep(shape, p=0.5, seed=2):
    g = torch.Generator().manual_seed(seed)
    return torch.empty(shape, dtype=torch.float64).bernoulli_(1 - p, generator=g).div_(1 - p)


def plain_dropped(scores, x, keep, src, dst, n):
    """The plain path under attention dropout: the aggregation weighs by the dropped alpha, the
    returned alpha is the undropped one."""
    alpha = segment_softmax(scores, dst, n)
    return segment_sum((alpha * keep).unsqueeze(-1) * gather_rows(x, src), dst, n), alpha


@pytest.mark.parametrize("heads", [1, 2])
def test_fused_with_a_dropout_mask_equals_plain(heads):
    scores, x, src, dst, n = _data(heads=heads)
    keep = _keep(scores.shape)
    assert 0 < int((keep == 0).sum()) < keep.numel()
    _check(lambda s, v: edge_attention(s, v, src, dst, n, keep=keep),
           lambda s, v: plain_dropped(s, v, keep, src, dst, n), scores, x)


@pytest.mark.parametrize("shared_mask", [False, True])
def test_fused_with_a_dropout_mask_equals_plain_under_vmap(shared_mask):
    """Per-replica masks (batched, as the bench's replica streams draw them) or one shared mask."""
    scores, x, src, dst, n = _data(replicas=3)
    if shared_mask:
        keep = _keep(scores.shape[1:])
        fused = vmap(lambda s, v: edge_attention(s, v, src, dst, n, keep=keep))
        ref = vmap(lambda s, v: plain_dropped(s, v, keep, src, dst, n))
    else:
        keep = _keep(scores.shape)
        fused = lambda s, v: vmap(lambda s, v, k: edge_attention(s, v, src, dst, n, keep=k))(s, v, keep)  # noqa: E731
        ref = lambda s, v: vmap(lambda s, v, k: plain_dropped(s, v, k, src, dst, n))(s, v, keep)  # noqa: E731
    _check(fused, ref, scores, x)


@pytest.mark.parametrize("name", ["gat", "gatv2"])
@pytest.mark.parametrize("streams", ["global", "replica"])
def test_layers_fused_equal_plain_under_attention_dropout(name, streams):
    """Training with attention dropout, float64: the fused aggregation draws the plain path's masks
    (same stream, same point) and gives its outputs and gradients, alone and stacked."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models(name, heads=2, attn_dropout=0.5)

    def run(enabled):
        with fused_kernels(["score", "aggregate"] if enabled else ["score"], min_elements=0):
            return training_outputs_and_grads(models, edge_index, x, streams)

    fused, plain_ = run(True), run(False)
    for a, b in zip(fused, plain_):
        torch.testing.assert_close(a, b, **TOL)
    # the dropout is live: the training output differs from the evaluation output
    models[0].eval()
    assert not torch.allclose(models[0](edge_index, x), fused[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_product_gives_torch_sparse_mm_bits_without_reading_its_output(dtype, monkeypatch):
    """The aggregation's CSR product (``sparse_dense_mm``) equals ``torch.sparse.mm`` bit for bit, and
    its output starts uninitialised: here NaN-filled, which would show in the result if it were read."""
    from zoo.ops.aggregate import sparse_dense_mm
    from zoo.ops.csr import csr_tensor

    g = torch.Generator().manual_seed(0)
    n, per_row, c = 300, 7, 64
    crow = torch.arange(0, n * per_row + 1, per_row)
    col = torch.randint(0, n, (n * per_row,), generator=g)
    a = csr_tensor(crow, col, torch.rand(n * per_row, generator=g, dtype=dtype), n)
    b = torch.randn(n, c, generator=g, dtype=dtype)
    ref = torch.sparse.mm(a, b)
    assert torch.equal(sparse_dense_mm(a, b), ref)
    monkeypatch.setattr(torch.Tensor, "new_empty",
                        lambda self, size, **kw: torch.full(size, float("nan"), dtype=self.dtype))
    assert torch.equal(sparse_dense_mm(a, b), ref)
