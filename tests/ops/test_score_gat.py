"""GAT's score kernels equal the plain ops to 1e-10 at float64 (values and gradients, with and
without vmap, the ops and whole GAT models on both aggregation paths): the per-node attention terms
as one matrix product (zoo.ops.message.node_scores) and the edge scores as one op
(zoo.ops.score.gat_edge_scores)."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

from tests.conftest import awkward_graph, record_calls, seeded_double_models, training_outputs_and_grads
from zoo.ops import fused
from zoo.ops.message import node_scores
from zoo.ops.score import gat_edge_scores
from zoo.ops.segment import gather_rows

# the torch-op kernels (the dispatch would otherwise prefer the compiled attention)
pytestmark = pytest.mark.usefixtures("torch_op_kernels")

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
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models("gat", heads=heads)

    def run(enabled):
        scores = record_calls(monkeypatch, "zoo.ops.dispatch.node_scores")
        edges = record_calls(monkeypatch, "zoo.ops.dispatch.gat_edge_scores")
        with fused(["score"] * enabled + ["aggregate"] * fused_aggregation, min_elements=0):
            out = training_outputs_and_grads(models, edge_index, x)
        assert (bool(scores), bool(edges)) == (enabled, enabled)  # both score kernels, or neither
        return out

    for a, b in zip(run(True), run(False)):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("replicas", [None, 3])
@pytest.mark.parametrize("slope", [0.2, 0.0])
def test_gat_edge_scores_equal_plain(replicas, slope):
    edge_index, n = awkward_graph()
    src, dst = edge_index
    g = torch.Generator().manual_seed(0)
    lead = () if replicas is None else (replicas,)
    s = torch.randn(*lead, n, 2, generator=g, dtype=torch.float64)
    t = torch.randn(*lead, n, 2, generator=g, dtype=torch.float64)
    t[..., 2, 0] = -s[..., 2, 0]  # the self-loop 2 -> 2 scores exactly 0 in head 0 (LeakyReLU's kink)
    s.requires_grad_(), t.requires_grad_()
    fused = lambda a, b: gat_edge_scores(a, b, src, dst, slope)  # noqa: E731
    plain_ = lambda a, b: torch.nn.functional.leaky_relu(gather_rows(a, src) + gather_rows(b, dst), slope)  # noqa: E731
    if replicas is not None:
        fused, plain_ = vmap(fused), vmap(plain_)
    out, ref = fused(s, t), plain_(s, t)
    torch.testing.assert_close(out, ref, **TOL)
    w = torch.randn(out.shape, generator=g, dtype=out.dtype)
    for a, b in zip(torch.autograd.grad((out * w).sum(), (s, t)), torch.autograd.grad((ref * w).sum(), (s, t))):
        torch.testing.assert_close(a, b, **TOL)


def test_gat_edge_scores_refuse_a_negative_slope():
    edge_index, n = awkward_graph()
    with pytest.raises(ValueError, match="negative_slope >= 0"):
        gat_edge_scores(torch.randn(n, 1), torch.randn(n, 1), edge_index[0], edge_index[1], -0.2)
