"""Constant-coefficient propagation (GCN) as one CSR product: equal to gather / multiply / scatter at
float64 to 1e-10 (values, gradients, under vmap), a replica's numbers independent of the group,
and no (E, C) edge tensor kept for the backward."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

from tests.conftest import awkward_graph, seeded_double_models
from tests.ops.test_memory_saved import _saved_ehc
from zoo.graph import as_graph
from zoo.ops._custom import HAS_CUSTOM_OPS
from zoo.ops.propagate import propagate
from zoo.ops.segment import gather_rows, segment_sum

pytestmark = pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4)")
TOL = dict(rtol=0, atol=1e-10)


def _graph_and_coef():
    edge_index, n = awkward_graph()
    g = as_graph(edge_index, torch.zeros(n, 1), "add")
    coef = torch.rand(g.num_edges, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    return g, coef


def _plain(g, coef, x):
    return segment_sum(coef * gather_rows(x, g.src), g.dst, g.num_nodes)


def test_equals_gather_scatter_values_and_gradients():
    g, coef = _graph_and_coef()
    x = torch.randn(g.num_nodes, 5, dtype=torch.float64, requires_grad=True)
    out, ref = propagate(g, coef, x, "test"), _plain(g, coef, x)
    torch.testing.assert_close(out, ref, **TOL)
    w = torch.randn_like(out)
    (gx,) = torch.autograd.grad((out * w).sum(), x)
    (rx,) = torch.autograd.grad((ref * w).sum(), x)
    torch.testing.assert_close(gx, rx, **TOL)


def test_under_vmap_equals_plain_and_a_replica_is_bitwise_itself_alone():
    g, coef = _graph_and_coef()
    x = torch.randn(3, g.num_nodes, 5, dtype=torch.float64, requires_grad=True)
    out = vmap(lambda t: propagate(g, coef, t, "test"))(x)
    torch.testing.assert_close(out, vmap(lambda t: _plain(g, coef, t))(x), **TOL)
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    alone = x[1].detach().requires_grad_()
    out1 = propagate(g, coef, alone, "test")
    (grad1,) = torch.autograd.grad(out1.square().sum(), alone)
    assert torch.equal(out1, out[1]) and torch.equal(grad1, grad[1])


def test_stacked_replicas_stay_first_in_memory():
    """Under vmap each replica's product is written into its slice of an (R, N, C) output, the layout
    the stacked layers' products make (folding the replicas into the columns copied the features into
    (N, R, C) and handed a strided layout to the next layer); the gradient keeps it too."""
    g, coef = _graph_and_coef()
    x = torch.randn(3, g.num_nodes, 5, dtype=torch.float64, requires_grad=True)
    out = vmap(lambda t: propagate(g, coef, t, "test"))(x)
    assert out.is_contiguous()
    (grad,) = torch.autograd.grad(out.square().sum(), x)
    assert grad.is_contiguous()


def test_learnt_coefficients_are_refused():
    g, coef = _graph_and_coef()
    with pytest.raises(ValueError, match="constants"):
        propagate(g, coef.requires_grad_(), torch.randn(g.num_nodes, 2, dtype=torch.float64), "test")


def test_gcn_keeps_no_edge_tensor_and_stacked_equals_alone():
    """The GCN layer kept its gathered (E, C) rows for the multiply's backward (before: one per
    layer, (E, R, C) under vmap)."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models("gcn", seeds=(0, 1, 2))
    g = as_graph(edge_index, x, "add")
    out, saved = _saved_ehc(lambda: models[0](edge_index, x), g.num_edges, 1, 8)
    assert not saved, f"GCN kept edge tensors {list(saved.values())}"
    params, buffers = stack_module_state(models)
    stacked = vmap(lambda p, b: functional_call(models[0], (p, b), (edge_index, x)))(params, buffers)
    for r, m in enumerate(models):  # (the dense maps: bmm under vmap, mm alone: equal to rounding)
        torch.testing.assert_close(stacked[r], m(edge_index, x), **TOL)


def _relu_case(batch=()):
    g, coef = _graph_and_coef()
    x = torch.randn(*batch, g.num_nodes, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    return g, coef, x.requires_grad_()


def test_fused_relu_is_relu_after_the_product_bitwise_values_and_gradients():
    """``relu=True``: the ReLU inside the product, its mask inside the backward's product: the bits of
    ``torch.relu`` after the plain propagation, forward and gradient."""
    g, coef, x = _relu_case()
    fused, ref = propagate(g, coef, x, "test", relu=True), torch.relu(propagate(g, coef, x, "test"))
    assert (ref == 0).any() and (ref > 0).any()
    assert torch.equal(fused, ref)
    w = torch.randn_like(ref)
    assert torch.equal(torch.autograd.grad((fused * w).sum(), x)[0], torch.autograd.grad((ref * w).sum(), x)[0])


def test_fused_relu_under_vmap_and_nested_vmap_is_bitwise_each_replica_alone():
    g, coef, x = _relu_case((2, 3))
    prop = lambda t: propagate(g, coef, t, "test", relu=True)  # noqa: E731
    for fn, xs in ((vmap(prop), x[0]), (vmap(vmap(prop)), x)):
        out = fn(xs)
        w = torch.randn_like(out)
        (grad,) = torch.autograd.grad((out * w).sum(), xs)
        for idx in ((1,) if xs.dim() == 3 else ((1, 2), (0, 1))):
            alone = xs[idx].detach().requires_grad_()
            one = torch.relu(propagate(g, coef, alone, "test"))
            (grad1,) = torch.autograd.grad((one * w[idx]).sum(), alone)
            assert torch.equal(one, out[idx]) and torch.equal(grad1, grad[idx])


def test_fused_relu_gradient_of_the_gradient():
    """The backward's gated product has a backward of its own (gradcheck at float64, away from 0)."""
    g, coef, x = _relu_case()
    assert torch.autograd.gradcheck(lambda t: propagate(g, coef, t, "test", relu=True), (x,))
    assert torch.autograd.gradgradcheck(lambda t: propagate(g, coef, t, "test", relu=True), (x,))
    xs = x.detach().unsqueeze(0).repeat(2, 1, 1).requires_grad_()
    assert torch.autograd.gradgradcheck(vmap(lambda t: propagate(g, coef, t, "test", relu=True)), (xs,))


def test_fused_relu_without_custom_ops_is_the_same():
    from zoo.ops._custom import custom_ops_disabled

    g, coef, x = _relu_case()
    fused = propagate(g, coef, x, "test", relu=True)
    with custom_ops_disabled():
        plain = propagate(g, coef, x, "test", relu=True)
    torch.testing.assert_close(fused, plain, **TOL)
