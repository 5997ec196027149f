"""Autograd keeps no (E, H, C) tensor the backward does not need."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.graph import as_graph
from zoo.ops import fused as fused_kernels
from zoo.ops.message import leaky_relu_dot
from zoo.ops.segment import segment_sum
from zoo.ops._custom import HAS_CUSTOM_OPS

# the torch-op kernels (the dispatch would otherwise prefer the compiled attention)
pytestmark = pytest.mark.usefixtures("torch_op_kernels")


def _saved_ehc(fn, E, H, C):
    """Storages of (E, H, C)-sized tensors that autograd saves while ``fn`` runs."""
    found = {}

    def pack(t):
        if t.dim() >= 2 and t.size(0) == E and t.numel() >= E * H * C:
            found[t.untyped_storage().data_ptr()] = tuple(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, found


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
def test_segment_sum_does_not_keep_its_values():
    E, H, C = 70_000, 2, 4  # above the size where the index-only backward is used
    values = torch.randn(E, H, C, requires_grad=True)
    index = torch.randint(0, 100, (E,))
    out, saved = _saved_ehc(lambda: segment_sum(values * 2.0, index, 100), E, H, C)
    assert not saved, f"segment_sum kept {list(saved.values())} for a backward that needs only the index"
    out.sum().backward()
    assert torch.equal(values.grad, torch.full_like(values, 2.0))


def test_leaky_relu_dot_equals_unfused_and_keeps_one_tensor():
    torch.manual_seed(0)
    h = torch.randn(50, 3, 4, dtype=torch.float64, requires_grad=True)
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    fused, saved = _saved_ehc(lambda: leaky_relu_dot(h, a, 0.2), 50, 3, 4)
    ref, saved_ref = _saved_ehc(lambda: (F.leaky_relu(h, 0.2) * a).sum(-1), 50, 3, 4)
    assert len(saved) == 1 and len(saved_ref) == 2
    assert torch.equal(fused, ref)
    w = torch.randn(50, 3, dtype=torch.float64)
    g1 = torch.autograd.grad((fused * w).sum(), (h, a))
    g2 = torch.autograd.grad((ref * w).sum(), (h, a))
    for x, y in zip(g1, g2):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)
    torch.autograd.gradcheck(lambda h, a: leaky_relu_dot(h, a, 0.2), (h[:5], a))


def test_leaky_relu_dot_under_vmap():
    from torch.func import vmap

    torch.manual_seed(0)
    h = torch.randn(2, 10, 3, 4, dtype=torch.float64, requires_grad=True)
    a = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    out = vmap(lambda h, a: leaky_relu_dot(h, a, 0.2))(h, a)
    ref = (F.leaky_relu(h, 0.2) * a.unsqueeze(1)).sum(-1)
    assert torch.equal(out, ref)
    g1 = torch.autograd.grad(out.sum(), (h, a))
    g2 = torch.autograd.grad(ref.sum(), (h, a))
    for x, y in zip(g1, g2):
        torch.testing.assert_close(x, y)


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
@pytest.mark.parametrize("fused", [False, True])
def test_attention_layers_keep_only_needed_edge_tensors(fused):
    """Per hidden layer: GAT keeps the gathered W h_u; GATv2 keeps W h_u and W h_u + W h_v.
    The fused softmax + aggregation (zoo.ops.aggregate) keeps none of them: GATv2 keeps only the sum."""
    with fused_kernels(True if fused else "score"):  # the score kernel on in both
        torch.manual_seed(0)
        n, heads, ch = 2000, 4, 16
        ei = torch.randint(0, n, (2, 20_000))
        x = torch.randn(n, 8)
        for name, per_layer in (("gat", 1 - fused), ("gatv2", 2 - fused)):
            model = zoo.build(name, in_dim=8, out_dim=3, hidden_dim=heads * ch, heads=heads, num_layers=3, out_heads=1)
            g = as_graph(ei, x, model.self_loops)
            out, saved = _saved_ehc(lambda: model(g, x), g.num_edges, heads, ch)
            assert len(saved) == 2 * per_layer, (name, list(saved.values()))


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
def test_attention_dropout_keeps_no_message_tensor():
    """Training with attention dropout, the fused aggregation takes the mask: GAT keeps no edge
    tensor, GATv2 only its score's sum.  The plain aggregation kept the gathered W h_u on top
    (stop 38)."""
    with fused_kernels(True):
        torch.manual_seed(0)
        n, heads, ch = 2000, 4, 16
        ei = torch.randint(0, n, (2, 20_000))
        x = torch.randn(n, 8)
        for name, per_layer in (("gat", 0), ("gatv2", 1)):
            model = zoo.build(name, in_dim=8, out_dim=3, hidden_dim=heads * ch, heads=heads, num_layers=3, out_heads=1,
                              attn_dropout=0.3).train()
            g = as_graph(ei, x, model.self_loops)
            out, saved = _saved_ehc(lambda: model(g, x), g.num_edges, heads, ch)
            assert len(saved) == 2 * per_layer, (name, list(saved.values()))


def test_weight_messages_equals_the_product_with_and_without_vmap():
    from torch.func import vmap

    from zoo.ops.message import weight_messages

    torch.manual_seed(0)
    w = torch.randn(30, 3, dtype=torch.float64, requires_grad=True)
    v = torch.randn(30, 3, 4, dtype=torch.float64, requires_grad=True)
    out, ref = weight_messages(w, v), w.unsqueeze(-1) * v
    assert torch.equal(out, ref)
    g = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (w, v), g), torch.autograd.grad(ref, (w, v), g)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    torch.autograd.gradcheck(weight_messages, (w[:4], v[:4]))
    wb, vb = w.detach().expand(2, 30, 3).clone().requires_grad_(), v.detach().expand(2, 30, 3, 4).clone()
    out_b = vmap(weight_messages)(wb, vb)
    assert torch.equal(out_b, wb.unsqueeze(-1) * vb)
    torch.testing.assert_close(torch.autograd.grad(out_b.sum(), wb)[0], vb.sum(-1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_squared_norm_gives_the_bits_of_pow_sum_and_its_gradient(dtype):
    """LipschitzNorm's per-node ``||W h||^2``: the forward and the one-pass backward are bitwise those
    of ``x.pow(2).sum(-1)`` under autograd, stacked (vmap) or alone, subnormals included."""
    from torch.func import vmap

    from zoo.ops.message import squared_norm

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, 4, 16, generator=g, dtype=dtype)
    x[0, 0, 0, :4] = torch.finfo(dtype).tiny / 8  # subnormal entries
    x = x.requires_grad_()
    w = torch.randn(3, 40, 4, generator=g, dtype=dtype)
    for run in (squared_norm, vmap(squared_norm)):
        out = run(x)
        ref = x.pow(2).sum(-1)
        assert torch.equal(out, ref)
        (grad,) = torch.autograd.grad((out * w).sum(), x)
        (ref_grad,) = torch.autograd.grad((ref * w).sum(), x)
        assert torch.equal(grad, ref_grad)
