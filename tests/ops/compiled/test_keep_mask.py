"""The compiled dropout draw (``zoo_kernels.keep_mask``) gives torch's mask bitwise and leaves the
generator where torch leaves it; the replicas' dropout masks use it (float32, CPU) with the same
numbers as the torch ops, alone and stacked under vmap."""
from __future__ import annotations

import importlib

import pytest
import torch
from torch.func import vmap

from zoo.ops._compiled import ops
from zoo.ops.dropout import ReplicaRandomness, _keep_scale, dropout, replica_randomness

dropout_module = importlib.import_module("zoo.ops.dropout")  # (zoo.ops.dropout is also a function's name)

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ kernels could not be built here (no compiler?)")


def _torch_mask(shape, generator, p):
    return torch.rand(shape, generator=generator).lt_(1.0 - p).div_(1.0 - p)


# the twister renews its 624 words when they run out: start before, at and after that point, and
# draw across one or more renewals
@pytest.mark.parametrize("drawn_before", [0, 1, 623, 624, 625, 1000])
@pytest.mark.parametrize("shape,p", [((5, 7), 0.6), ((624,), 0.5), ((3 * 624 + 5,), 0.1), ((40, 77), 0.3), ((0,), 0.5)])
def test_keep_mask_is_torchs_mask_and_stream(drawn_before, shape, p):
    a, b = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    if drawn_before:
        torch.rand(drawn_before, generator=a)
        torch.rand(drawn_before, generator=b)
    expected = _torch_mask(shape, a, p)
    out = torch.full(shape, float("nan"))
    torch.ops.zoo_kernels.keep_mask(out, b, 1.0 - p, _keep_scale(p, torch.float32))
    assert torch.equal(out, expected)
    assert torch.equal(a.get_state(), b.get_state())
    assert torch.equal(torch.rand(700, generator=a), torch.rand(700, generator=b))


def test_keep_mask_refuses_what_it_cannot_fill():
    g = torch.Generator().manual_seed(0)
    for bad in (torch.empty(4, dtype=torch.float64), torch.empty(4, 2).t()):
        with pytest.raises(RuntimeError, match="contiguous float32"):
            torch.ops.zoo_kernels.keep_mask(bad, g, 0.5, 2.0)


def _masks(rng_seeds, like, p, kernel_on, monkeypatch):
    """Each replica's mask, then one more draw of each stream (its position after the mask)."""
    if not kernel_on:
        monkeypatch.setattr(dropout_module, "_keep_mask_kernel", lambda dtype, device: None)
    rng = ReplicaRandomness(rng_seeds)
    masks = [rng.mask(r, like, p) for r in range(len(rng_seeds))]
    after = [torch.rand(3, generator=rng.generator(r, like.device)) for r in range(len(rng_seeds))]
    monkeypatch.undo()
    return masks, after


def test_replica_masks_are_the_torch_ops_numbers(monkeypatch):
    like = torch.empty(300, 41)
    compiled = _masks([3, 4], like, 0.6, True, monkeypatch)
    plain = _masks([3, 4], like, 0.6, False, monkeypatch)
    for a, b in zip(compiled[0] + compiled[1], plain[0] + plain[1]):
        assert torch.equal(a, b)


def test_stacked_replicas_draw_their_masks_with_the_compiled_draw(monkeypatch):
    """Under vmap each replica's mask is drawn by ``keep_mask`` into its slice of one tensor, and the
    stacked dropout equals each replica's dropout alone."""
    calls = []
    real = torch.ops.zoo_kernels.keep_mask

    def spy(out, generator, q, scale):
        calls.append(tuple(out.shape))
        return real(out, generator, q, scale)

    monkeypatch.setattr(dropout_module, "_keep_mask_kernel", lambda dtype, device: spy)
    x = torch.randn(50, 30)
    seeds = [7, 8, 9]
    rng = ReplicaRandomness(seeds)
    tokens = rng.tokens(x.device)

    def one(token):
        with replica_randomness(rng, token):
            return dropout(x, 0.6, training=True)

    stacked = vmap(one, randomness="different")(tokens)
    assert calls == [(50, 30)] * 3
    for r, seed in enumerate(seeds):
        alone_rng = ReplicaRandomness([seed])
        with replica_randomness(alone_rng, torch.tensor(0)):
            alone = dropout(x, 0.6, training=True)
        assert torch.equal(stacked[r], alone)
        assert torch.equal(alone, x * _torch_mask((50, 30), torch.Generator().manual_seed(
            (seed * 1_000_003 + 0x5EED) % 2 ** 63), 0.6))
