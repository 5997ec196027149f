"""Edge primitives: values and gradients equal plain indexing, inside and outside vmap."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

from zoo.ops.segment import gather_rows, segment_softmax, segment_sum
from zoo.ops._custom import HAS_CUSTOM_OPS


def reference(x, index, n):
    return torch.zeros(n, *x.shape[1:], dtype=x.dtype).index_add(0, index, x[index])


def test_gather_and_segment_sum_match_indexing_with_gradients_under_vmap():
    torch.manual_seed(0)
    src = torch.tensor([0, 2, 2, 1, 3, 0])
    xs = torch.randn(4, 5, 3, 2, dtype=torch.float64, requires_grad=True)  # 4 replicas of (5, 3, 2)

    def f(x):
        return segment_sum(gather_rows(x, src) * 2.0, src.flip(0), 5)

    out = vmap(f)(xs)
    expected = torch.stack([segment_sum(gather_rows(x, src) * 2.0, src.flip(0), 5) for x in xs])
    loop = torch.stack([torch.zeros(5, 3, 2, dtype=x.dtype).index_add(0, src.flip(0), 2.0 * x[src]) for x in xs])
    torch.testing.assert_close(out, loop)
    torch.testing.assert_close(expected, loop)
    weights = torch.randn_like(out)
    (g_vmap,) = torch.autograd.grad((out * weights).sum(), xs)
    (g_loop,) = torch.autograd.grad((loop * weights).sum(), xs)
    torch.testing.assert_close(g_vmap, g_loop)


def test_per_replica_indices_fall_back_correctly():
    x = torch.randn(3, 6, 4)
    idx = torch.randint(0, 6, (3, 9))
    out = vmap(gather_rows)(x, idx)
    torch.testing.assert_close(out, torch.stack([x[r][idx[r]] for r in range(3)]))
    summed = vmap(lambda v, i: segment_sum(v, i, 6))(torch.randn(3, 9, 4), idx)
    assert summed.shape == (3, 6, 4)


def test_segment_softmax_sums_to_one_and_handles_huge_scores():
    index = torch.tensor([0, 0, 1, 2, 2, 2])
    scores = torch.tensor([[1e4], [1e4 - 1.0], [-5.0], [0.0], [1.0], [2.0]])
    alpha = segment_softmax(scores, index, 4)
    torch.testing.assert_close(segment_sum(alpha, index, 4)[:3], torch.ones(3, 1))
    assert torch.isfinite(alpha).all()
    torch.testing.assert_close(alpha[:2, 0], torch.softmax(torch.tensor([1.0, 0.0]), 0))


def _sparse_features(n=300, f=40, density=0.05, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, f, generator=g, dtype=torch.float64) < density).to(torch.float64) * \
        torch.rand(n, f, generator=g, dtype=torch.float64)


def test_csr_linear_equals_dense(monkeypatch):
    """The CSR input matmul equals F.linear to 1e-10 at float64: forward, weight gradient, under vmap."""
    from zoo.ops import sparse_linear as zf

    monkeypatch.setattr(zf, "SPARSE_MIN_ELEMENTS", 0)
    x = _sparse_features()
    assert zf._SPARSE.get(x) is not None  # the sparse path is taken
    w = torch.randn(3, 7, 40, dtype=torch.float64, requires_grad=True)
    out = torch.func.vmap(zf.linear, in_dims=(None, 0))(x, w)
    ref = torch.func.vmap(torch.nn.functional.linear, in_dims=(None, 0))(x, w)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=0)
    g_out, = torch.autograd.grad((out ** 2).sum(), w)
    g_ref, = torch.autograd.grad((ref ** 2).sum(), w)
    torch.testing.assert_close(g_out, g_ref, atol=1e-10, rtol=0)
    single = zf.linear(x, w[1])
    torch.testing.assert_close(single, ref[1], atol=1e-10, rtol=0)
    x[0, 0] = 5.0  # in-place change: the cached CSR copy is rebuilt
    torch.testing.assert_close(zf.linear(x, w[1]), torch.nn.functional.linear(x, w[1]), atol=1e-10, rtol=0)


def test_csr_parts_hold_the_input_and_its_transpose():
    """The transpose's CSR parts (taken from the input's CSC form, not from a dense transpose) are
    the dense transpose's CSR parts, entry for entry."""
    import warnings

    from zoo.ops import sparse_linear as zf

    x = _sparse_features()
    parts = zf._csr_parts(x)
    assert parts is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        csr, csr_t = x.to_sparse_csr(), x.t().contiguous().to_sparse_csr()
    expected = (csr.crow_indices(), csr.col_indices(), csr.values(),
                csr_t.crow_indices(), csr_t.col_indices(), csr_t.values())
    for got, want in zip(parts, expected):
        assert torch.equal(got, want)


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
def test_dense_inputs_keep_dense_path(monkeypatch):
    from zoo.ops import sparse_linear as zf

    w = torch.randn(7, 40, dtype=torch.float64)
    assert zf._sparse_parts(torch.randn(50, 40, dtype=torch.float64), w) is None  # 100 % dense
    monkeypatch.setattr(zf, "SPARSE_MIN_ELEMENTS", 10 ** 9)
    x = _sparse_features()
    assert zf._sparse_parts(x, w) is None  # small and one replica: dense GEMM
    # stacked replicas (batched weight): CSR even when small
    picked = torch.func.vmap(lambda w: torch.tensor(zf._sparse_parts(x, w) is not None), in_dims=0)(w.expand(2, 7, 40))
    assert bool(picked.all())


@pytest.mark.parametrize("model", ["gat", "gatv2", "gcn"])
def test_sparse_input_models_equal_dense_and_grouped_equals_sequential(model, monkeypatch):
    """Training with CSR first-layer inputs gives the dense path's numbers (1e-10, float64),
    and grouped == sequential on that path."""
    from tests.trainer.test_train import _run, _sequential, synthetic_task
    from zoo.trainer.config import TrainConfig
    from zoo.ops import sparse_linear as zf

    task = synthetic_task(n=60, features=30)
    task.data.x = _sparse_features(60, 30, 0.1).float()
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=10, loss_threshold=0.0)
    models, seeds = [(model, 2, "xavier")] * 2, [0, 1]
    dense, _ = _run(task, models, seeds, cfg, stacked=True)
    monkeypatch.setattr(zf, "SPARSE_MIN_ELEMENTS", 0)
    sparse, _ = _run(task, models, seeds, cfg, stacked=True)
    seq = _sequential(task, models, seeds, cfg)
    for d, s, q in zip(dense, sparse, seq):
        assert d.val_loss == pytest.approx(s.val_loss, abs=1e-10, rel=0)
        assert d.train_loss == pytest.approx(s.train_loss, abs=1e-10, rel=0)
        assert s.metrics == q.metrics and s.best_epoch == q.best_epoch
        assert s.val_loss == pytest.approx(q.val_loss, abs=1e-10, rel=0)
