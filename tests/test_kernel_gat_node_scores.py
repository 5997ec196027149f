"""GAT's per-node attention terms as one matrix product (zoo.nn.functional.node_scores) equal the
elementwise products to 1e-10 at float64: values and gradients, with and without vmap, the op and
whole GAT models (both aggregation paths)."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

import zoo
from tests.conftest import awkward_graph
from zoo.nn import fused as zfused
from zoo.nn import fused_score
from zoo.nn.functional import node_scores

TOL = dict(rtol=0, atol=1e-10)


def plain(x, att_src, att_dst):
    return (x * att_src).sum(-1), (x * att_dst).sum(-1)


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("replicas", [None, 2])
def test_node_scores_equal_elementwise_products(heads, replicas):
    g = torch.Generator().manual_seed(0)
    lead = () if replicas is None else (replicas,)
    x = torch.randn(*lead, 7, heads, 4, generator=g, dtype=torch.float64, requires_grad=True)
    a_s = torch.randn(*lead, heads, 4, generator=g, dtype=torch.float64, requires_grad=True)
    a_d = torch.randn(*lead, heads, 4, generator=g, dtype=torch.float64, requires_grad=True)
    f, p = (node_scores, plain) if replicas is None else (vmap(node_scores), vmap(plain))
    out, ref = f(x, a_s, a_d), p(x, a_s, a_d)
    w = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in out]
    for a, b in zip(out, ref):
        torch.testing.assert_close(a, b, **TOL)
    loss = lambda pair: sum((o * wi).sum() for o, wi in zip(pair, w))  # noqa: E731
    for a, b in zip(torch.autograd.grad(loss(out), (x, a_s, a_d)), torch.autograd.grad(loss(ref), (x, a_s, a_d))):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("fused_aggregation", [True, False])
@pytest.mark.parametrize("heads", [1, 2])
def test_gat_models_node_scores_equal_plain(heads, fused_aggregation, monkeypatch):
    monkeypatch.setattr(zfused, "FUSED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(zfused, "ENABLED", fused_aggregation)
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, num_layers=3, heads=heads).double())
    params, buffers = stack_module_state(models)

    def run(enabled):
        monkeypatch.setattr(fused_score, "ENABLED", enabled)
        calls = []

        def spy(*args):
            calls.append(1)
            return node_scores(*args)

        monkeypatch.setattr("zoo.models.gat.node_scores", spy)
        single = models[0](edge_index, x)
        g_single = torch.autograd.grad(single.square().sum(), list(models[0].parameters()))
        stacked = vmap(lambda p, b: functional_call(models[0], (p, b), (edge_index, x)))(params, buffers)
        g_stacked = torch.autograd.grad(stacked.square().sum(), list(params.values()))
        assert bool(calls) == enabled
        return (single, stacked) + g_single + g_stacked

    for a, b in zip(run(True), run(False)):
        torch.testing.assert_close(a, b, **TOL)
