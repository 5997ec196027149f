"""The edge operations without ``torch.library.custom_op`` / ``register_vmap`` (torch < 2.4, e.g. the
DGL environment's torch 2.2) give the same numbers as with them.

:func:`zoo.ops._custom.custom_ops_disabled` runs that path on any torch: plain ops, fused
kernels only outside vmap, vmap over the plain ops.  Compared at float64 with the custom-op path
(where this torch has one) and with separate, unstacked replicas; the fused kernels are forced on
for every size so that each dispatch decision is exercised.  ``make test-dgl`` runs this file on
torch 2.2, where the fallback is the only path.
"""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

import zoo
from zoo.ops import fused
from zoo.ops._custom import HAS_CUSTOM_OPS, custom_ops_active, custom_ops_disabled
from tests.conftest import awkward_graph, small_kwargs

pytestmark = pytest.mark.fallback

MODELS = ["gat", "gatv2", "gatdb", "gatnb", "gate", "gcn", "unimp", "graph_transformer"]


def _replicas(name):
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = zoo.build(name, **small_kwargs(name)).double().eval()  # no dropout: deterministic
        models.append(m)
    return models


def _inputs():
    edge_index, n = awkward_graph()
    torch.manual_seed(5)
    return edge_index, torch.randn(n, 6, dtype=torch.float64), torch.randint(0, 3, (n,))


def _stacked_loss_and_grads(models, edge_index, x, y):
    """Loss and parameter gradients of every replica, as the runner computes them: a vmapped
    functional call over stacked parameters, then one ordinary backward."""
    for m in models:
        m(edge_index, x)  # materialise lazy parameters
    params, buffers = stack_module_state(models)

    def call(p, b):
        return functional_call(models[0], (p, b), (edge_index, x))

    logits = vmap(call, randomness="different")(params, buffers)
    losses = torch.stack([torch.nn.functional.cross_entropy(out, y) for out in logits])
    losses.sum().backward()
    return losses.detach(), {k: p.grad for k, p in params.items()}


def _separate_loss_and_grads(models, edge_index, x, y):
    losses, grads = [], []
    for m in models:
        m.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(edge_index, x), y)
        loss.backward()
        losses.append(loss.detach())
        grads.append({k: p.grad.clone() for k, p in m.named_parameters()})
    return torch.stack(losses), grads


@pytest.mark.parametrize("name", MODELS)
def test_fallback_equals_separate_replicas_under_vmap(name):
    edge_index, x, y = _inputs()
    models = _replicas(name)
    with fused(True, min_elements=0), custom_ops_disabled():
        assert not custom_ops_active()
        losses, grads = _stacked_loss_and_grads(models, edge_index, x, y)
        ref_losses, ref_grads = _separate_loss_and_grads(models, edge_index, x, y)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-12, atol=1e-12)
    for r, ref in enumerate(ref_grads):
        for key, value in ref.items():
            torch.testing.assert_close(grads[key][r], value, rtol=1e-10, atol=1e-12, msg=f"{name} {key} replica {r}")


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="this torch has no custom ops: the fallback is the only path")
@pytest.mark.parametrize("compiled", [False, True], ids=["sparse-kernels", "compiled-kernels"])
@pytest.mark.parametrize("name", MODELS)
def test_fallback_equals_the_custom_op_path(name, compiled):
    """The fallback path (no custom ops: neither the compiled attention nor vmap rules) against the
    custom-op path with the sparse-product kernels (outside vmap the very same kernels: bitwise) and
    with the compiled attention (a different kernel outside vmap too: equal to float64 rounding)."""
    edge_index, x, y = _inputs()
    models = _replicas(name)
    with fused(True, min_elements=0, compiled=compiled):
        assert custom_ops_active()
        losses, grads = _stacked_loss_and_grads(models, edge_index, x, y)
        out = [m(edge_index, x) for m in models]
        with custom_ops_disabled():
            fb_losses, fb_grads = _stacked_loss_and_grads(models, edge_index, x, y)
            fb_out = [m(edge_index, x) for m in models]
    assert custom_ops_active()  # restored
    torch.testing.assert_close(fb_losses, losses, rtol=1e-12, atol=1e-12)
    for key in grads:
        torch.testing.assert_close(fb_grads[key], grads[key], rtol=1e-10, atol=1e-12, msg=f"{name} {key}")
    # Outside vmap the attention models run the very same kernels: bitwise.  GCN's propagate falls
    # back to segment_sum over gathered rows, not the CSR product, so it sums in another order:
    # equal to float64 rounding (5.6e-17 apart on some CPUs, bitwise on others).
    same_kernels = not compiled and name != "gcn"
    for a, b in zip(fb_out, out):
        if same_kernels:
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        else:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_switch_restores_on_error():
    before = custom_ops_active()
    with pytest.raises(RuntimeError):
        with custom_ops_disabled():
            raise RuntimeError("boom")
    assert custom_ops_active() == before
