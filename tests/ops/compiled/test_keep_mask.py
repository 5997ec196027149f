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


@pytest.mark.parametrize("drawn_before", [0, 624])
def test_keep_mask_with_an_input_gives_the_dropped_input(drawn_before):
    """x * mask in the same pass (negative entries and zeros: the signs of x * 0 as torch's mul)."""
    shape, p = (40, 77), 0.6
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    x[0, :5] = 0.0
    a, b = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    torch.rand(drawn_before, generator=a)
    torch.rand(drawn_before, generator=b)
    expected = x * _torch_mask(shape, a, p)
    out = torch.empty(shape)
    torch.ops.zoo_kernels.keep_mask(out, b, 1.0 - p, _keep_scale(p, torch.float32), x)
    assert torch.equal(out.view(torch.int32), expected.view(torch.int32))  # signed zeros included
    assert torch.equal(a.get_state(), b.get_state())


def test_keep_mask_refuses_what_it_cannot_fill():
    g = torch.Generator().manual_seed(0)
    for bad in (torch.empty(4, dtype=torch.float64), torch.empty(4, 2).t()):
        with pytest.raises(RuntimeError, match="contiguous float32"):
            torch.ops.zoo_kernels.keep_mask(bad, g, 0.5, 2.0)
    with pytest.raises(RuntimeError, match="out's shape"):
        torch.ops.zoo_kernels.keep_mask(torch.empty(4), g, 0.5, 2.0, torch.empty(5))
    x = torch.ones(4)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.ops.zoo_kernels.keep_mask(x, g, 0.5, 2.0, x)


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


def _spy(monkeypatch):
    calls = []
    real = torch.ops.zoo_kernels.keep_mask

    def spy(out, generator, q, scale, x=None):
        calls.append((tuple(out.shape), x is not None))
        return real(out, generator, q, scale, x)

    monkeypatch.setattr(dropout_module, "_keep_mask_kernel", lambda dtype, device: spy)
    return calls


def _stacked_and_alone(x, seeds, p=0.6):
    """dropout(x) of stacked replicas (vmap; x shared or batched) and of each replica alone."""
    rng = ReplicaRandomness(seeds)
    tokens = rng.tokens(x.device)
    shared = x.dim() == 2

    def one(token, *xs):
        with replica_randomness(rng, token):
            return dropout(xs[0] if xs else x, p, training=True)

    stacked = vmap(one, randomness="different")(tokens) if shared else \
        vmap(one, randomness="different")(tokens, x)
    alone = []
    for r, seed in enumerate(seeds):
        with replica_randomness(ReplicaRandomness([seed]), torch.tensor(0)):
            alone.append(dropout(x if shared else x[r], p, training=True))
    return stacked, alone


def test_stacked_replicas_drop_a_shared_input_in_one_compiled_pass(monkeypatch):
    """Under vmap a constant input shared by the replicas (a dense first layer's features) is dropped
    by ``keep_mask`` with the input: each replica's dropped copy written into its slice, no mask
    tensor — and each replica's numbers are its dropout alone, x * its torch mask."""
    calls = _spy(monkeypatch)
    x = torch.randn(50, 30)
    x[:, 0] = 0.0
    seeds = [7, 8, 9]
    stacked, alone = _stacked_and_alone(x, seeds)
    assert calls[:3] == [((50, 30), True)] * 3
    for r, seed in enumerate(seeds):
        assert torch.equal(stacked[r], alone[r])
        expected = x * _torch_mask((50, 30), torch.Generator().manual_seed((seed * 1_000_003 + 0x5EED) % 2 ** 63), 0.6)
        assert torch.equal(alone[r].view(torch.int32), expected.view(torch.int32))


def test_stacked_replicas_draw_the_masks_of_their_own_activations(monkeypatch):
    """Batched activations (which need the mask for their gradient) keep ``x * mask``: the masks drawn
    by ``keep_mask`` into one stacked tensor; each replica as alone."""
    calls = _spy(monkeypatch)
    x = torch.randn(3, 20, 16, requires_grad=True)
    stacked, alone = _stacked_and_alone(x, [1, 2, 3])
    assert calls[:3] == [((20, 16), False)] * 3
    for r in range(3):
        assert torch.equal(stacked[r], alone[r])


@pytest.mark.parametrize("drawn_before", [0, 623, 1000])
@pytest.mark.parametrize("rows,width,reps", [(300, 8, 5), (1000, 1, 3), (7, 3, 2)])
def test_keep_mask_rows_fills_a_replicas_slice_with_keep_masks_numbers(drawn_before, rows, width, reps):
    """Into one replica's ``(E, H)`` slice of an ``(E, R, H)`` stack (rows apart): ``keep_mask``'s numbers at
    the same places, the stream left where it leaves it, the other replicas' slices untouched."""
    a, b = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    torch.rand(drawn_before, generator=a)
    torch.rand(drawn_before, generator=b)
    want = torch.empty(rows, width)
    torch.ops.zoo_kernels.keep_mask(want, a, 0.4, _keep_scale(0.6, torch.float32))
    stack = torch.full((rows, reps, width), float("nan"))
    torch.ops.zoo_kernels.keep_mask_rows(stack[:, 1], b, 0.4, _keep_scale(0.6, torch.float32))
    assert torch.equal(stack[:, 1], want)
    assert stack[:, 0].isnan().all() and stack[:, 2:].isnan().all()
    assert torch.equal(a.get_state(), b.get_state())


def test_stacked_attention_masks_lie_in_the_order_the_attention_folds(monkeypatch):
    """The compiled attention's ``(E, H)`` mask of stacked replicas (a shared shape): each replica's mask is
    its mask alone, and the stack is ``(E, R, H)`` in memory (the op folds the replicas into the heads
    without a copy); without the rows kernel, the same numbers as an ``(R, E, H)`` stack."""
    seeds, like = [4, 5, 6], torch.empty(500, 8)
    rng, seen = ReplicaRandomness(seeds), []

    def one(token):
        with replica_randomness(rng, token):
            mask = dropout_module.dropout_mask(like, 0.6)
        seen.append(torch._C._functorch.get_unwrapped(mask))
        return mask

    stacked = vmap(one, randomness="different")(rng.tokens(like.device))
    assert seen[0].shape == (500, 3, 8) and seen[0].is_contiguous()
    monkeypatch.setattr(dropout_module, "_keep_mask_rows_kernel", lambda *a: False)
    rng = ReplicaRandomness(seeds)
    plain = vmap(one, randomness="different")(rng.tokens(like.device))
    assert seen[1].shape == (3, 500, 8)
    for r, seed in enumerate(seeds):
        alone = ReplicaRandomness([seed]).mask(0, like, 0.6)
        assert torch.equal(stacked[r], alone) and torch.equal(plain[r], alone)
