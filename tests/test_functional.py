"""Edge primitives: values and gradients equal plain indexing, inside and outside vmap."""
from __future__ import annotations

import torch
from torch.func import vmap

from zoo.nn.functional import gather_rows, segment_softmax, segment_sum


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
