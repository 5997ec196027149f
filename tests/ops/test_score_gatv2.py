"""The fused GATv2 score (zoo.ops.score) equals the plain ops to 1e-10 at float64: values and
gradients, with and without vmap, shared and separate weights, the op and whole GATv2 models."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

import zoo
from tests.conftest import awkward_graph, record_calls, seeded_double_models, training_outputs_and_grads
from zoo.ops import fused
from zoo.ops.dispatch import fuses_gatv2_score as worth_it
from zoo.ops import score as fused_score
from zoo.ops.message import leaky_relu_dot
from zoo.ops.score import gatv2_score
from zoo.ops.segment import gather_rows
from zoo.ops._custom import HAS_CUSTOM_OPS

# the torch-op kernels (the dispatch would otherwise prefer the compiled attention)
pytestmark = pytest.mark.usefixtures("torch_op_kernels")

TOL = dict(rtol=0, atol=1e-10)


def plain(x_src, x_dst, att, src, dst, slope):
    return leaky_relu_dot(gather_rows(x_src, src) + gather_rows(x_src if x_dst is None else x_dst, dst), att, slope)


def _inputs(replicas, heads, seed=0):
    g = torch.Generator().manual_seed(seed)
    lead = () if replicas is None else (replicas,)
    edge_index, n = awkward_graph()
    xs = torch.randn(*lead, n, heads, 3, generator=g, dtype=torch.float64)
    xs[..., 2, :, 0] = 0.0  # node 2 has a self-loop: with shared weights z = 2 x = 0 exactly (LeakyReLU's kink)
    xt = torch.randn(*lead, n, heads, 3, generator=g, dtype=torch.float64)
    xt[..., 2, :, 1] = -xs[..., 2, :, 1]  # separate weights: z = 0 on the self-loop too
    att = torch.randn(*lead, heads, 3, generator=g, dtype=torch.float64)
    return [t.requires_grad_() for t in (xs, xt, att)], edge_index[0], edge_index[1]


@pytest.mark.parametrize("replicas", [None, 3])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("slope", [0.2, 0.0])
@pytest.mark.parametrize("chunked", [False, True])
def test_gatv2_score_equals_plain(replicas, shared, heads, slope, chunked, monkeypatch):
    (xs, xt, att), src, dst = _inputs(replicas, heads)
    if chunked:  # blocks of 5 edges forward, 3 backward (the last ones shorter): 12 edges in all
        row = xs.element_size() * heads * 3 * (replicas or 1)
        monkeypatch.setattr(fused_score, "CHUNK_MIN_BYTES", 0)
        monkeypatch.setattr(fused_score, "FORWARD_CHUNK_BYTES", 5 * row)
        monkeypatch.setattr(fused_score, "BACKWARD_CHUNK_BYTES", 3 * row + 1)
        assert [b - a for a, b in fused_score._blocks(torch.empty(12, heads * (replicas or 1), 3,
                                                                   dtype=xs.dtype), 5 * row)] == [5, 5, 2]

    def wrap(fn):
        f = lambda a, b, c: fn(a, None if shared else b, c, src, dst, slope)  # noqa: E731
        return f if replicas is None else vmap(f)

    out, ref = wrap(gatv2_score)(xs, xt, att), wrap(plain)(xs, xt, att)
    torch.testing.assert_close(out, ref, **TOL)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    wrt = (xs, att) if shared else (xs, xt, att)
    for a, b in zip(torch.autograd.grad((out * w).sum(), wrt), torch.autograd.grad((ref * w).sum(), wrt)):
        torch.testing.assert_close(a, b, **TOL)


def test_gatv2_score_with_shared_att_under_vmap():
    """Features batched, the attention vector shared by all replicas (in_dims None)."""
    (xs, _, att), src, dst = _inputs(4, 2)
    att1 = att[0].detach().requires_grad_()
    out = vmap(lambda a: gatv2_score(a, None, att1, src, dst, 0.2))(xs)
    ref = vmap(lambda a: plain(a, None, att1, src, dst, 0.2))(xs)
    torch.testing.assert_close(out, ref, **TOL)
    w = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad((out * w).sum(), (xs, att1)), torch.autograd.grad((ref * w).sum(), (xs, att1))):
        torch.testing.assert_close(a, b, **TOL)


def test_gatv2_score_refuses_a_negative_slope():
    (xs, _, att), src, dst = _inputs(None, 1)
    with pytest.raises(ValueError, match="negative_slope >= 0"):
        gatv2_score(xs, None, att, src, dst, -0.1)


@pytest.mark.parametrize("options", [dict(), dict(share_weights=False), dict(share_weights=False, update_weight="separate"),
                                     dict(attention_bias=True), dict(share_weights=False, attention_bias=True)])
@pytest.mark.parametrize("fused_aggregation", [True, False])
def test_gatv2_models_fused_score_equal_plain(options, fused_aggregation, monkeypatch):
    """Whole GATv2 models at float64, one replica and two stacked under vmap, with the fused and the
    plain aggregation: the fused score gives the plain path's outputs and gradients, and is taken."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models("gatv2", heads=2, **options)
    for i, m in enumerate(models):  # the attention bias starts at zero: give it values
        for name, p in m.named_parameters():
            if name.endswith("att_bias"):
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(i), dtype=p.dtype))

    def run(enabled):
        calls = record_calls(monkeypatch, "zoo.ops.dispatch.gatv2_score")
        with fused(["score"] * enabled + ["aggregate"] * fused_aggregation, min_elements=0):
            out = training_outputs_and_grads(models, edge_index, x)
        assert bool(calls) == enabled
        return out

    for a, b in zip(run(True), run(False)):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("options, takes_fused", [(dict(), True), (dict(attention_bias=True), True),
                                                  (dict(negative_slope=-0.1), False)])
def test_gatv2_scores_take_the_fused_op_unless_it_cannot(options, takes_fused, monkeypatch):
    """A negative slope keeps the plain ops; the attention bias, added to the target rows first
    (dispatch.fold_node_terms), does not."""
    with fused(True, min_elements=0):
        calls = record_calls(monkeypatch, "zoo.ops.dispatch.gatv2_score")
        edge_index, n = awkward_graph()
        model = zoo.build("gatv2", in_dim=6, out_dim=3, hidden_dim=8, num_layers=2, **options)
        out = model(edge_index, torch.randn(n, 6))
        assert out.shape == (n, 3) and bool(calls) == takes_fused


def test_folding_the_attention_bias_leaves_edge_terms_and_the_pre_activation():
    """x_u + x_v + b = x_u + (x_v + b): the bias joins the target rows, an (E, H, C) edge term stays."""
    from zoo.ops.dispatch import fold_node_terms

    g = torch.Generator().manual_seed(0)
    n, e, h, c = 5, 9, 2, 3
    x_src, bias = torch.randn(n, h, c, generator=g, dtype=torch.float64), torch.randn(h, c, generator=g, dtype=torch.float64)
    edge = torch.randn(e, h, c, generator=g, dtype=torch.float64)
    src, dst = torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)
    target, left = fold_node_terms(x_src, None, (edge, bias))
    assert len(left) == 1 and left[0] is edge
    torch.testing.assert_close(x_src[src] + target[dst] + edge, x_src[src] + x_src[dst] + edge + bias)
    assert fold_node_terms(x_src, None, (edge,)) == (None, (edge,))  # nothing to fold: unchanged


@pytest.mark.parametrize("fused_aggregation", [True, False])
@pytest.mark.parametrize("streams", ["global", "replica"])
def test_gatv2_fused_score_under_attention_dropout_equals_plain(fused_aggregation, streams, monkeypatch):
    """Training with attention dropout (it acts on alpha, after the score), float64: the fused score
    is taken and gives the plain score's outputs and gradients under the same masks, alone and two
    replicas stacked, on the global stream and on each replica's own."""
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models("gatv2", heads=2, attn_dropout=0.5)

    def run(enabled):
        calls = record_calls(monkeypatch, "zoo.ops.dispatch.gatv2_score")
        with fused(["score"] * enabled + ["aggregate"] * fused_aggregation, min_elements=0):
            out = training_outputs_and_grads(models, edge_index, x, streams)
        assert bool(calls) == enabled
        return out

    fused_, plain_ = run(True), run(False)
    for a, b in zip(fused_, plain_):
        torch.testing.assert_close(a, b, **TOL)
    models[0].eval()  # the dropout is live: the training output differs from the evaluation output
    assert not torch.allclose(models[0](edge_index, x), fused_[0])


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
def test_fused_score_size_rule(monkeypatch):
    """One replica on a tiny graph keeps the plain ops (measured slower there); vmap always fuses."""
    x = torch.randn(7, 2, 3)
    assert not worth_it(12, x)
    assert all(vmap(lambda t: torch.tensor(worth_it(12, t)))(torch.randn(2, 7, 2, 3)))
    with fused(True, min_elements=12 * 6):
        assert worth_it(12, x) and not worth_it(11, x)
        with fused(False):
            assert not worth_it(12, x)


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4)")
def test_fused_score_size_rule_under_attention_dropout():
    """While attention dropout is live the size alone decides, stacked or not (the aggregation's rule):
    a tiny graph's replicas keep the plain score, as each does alone."""
    stacked = torch.randn(2, 7, 2, 3)

    def under_vmap(dropping):
        return bool(vmap(lambda t: torch.tensor(worth_it(12, t, dropping=dropping)))(stacked).all())

    assert under_vmap(False) and not under_vmap(True)
    with fused(True, min_elements=12 * 6):
        assert under_vmap(True) and worth_it(12, stacked[0], dropping=True)


def test_gatv2_scores_compute_in_float32_under_autocast():
    """Every dispatch entry point computes in float32 under autocast (zoo.ops.precision): the
    scores of bfloat16 inputs come back float32."""
    from zoo.graph import as_graph
    from zoo.ops.dispatch import gatv2_scores

    edge_index, n = awkward_graph()
    graph = as_graph(edge_index, torch.randn(n, 4))
    x = torch.randn(n, 2, 3, dtype=torch.bfloat16)
    att, bias = torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(2, 3, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores, _ = gatv2_scores(x, None, att, graph, 0.2, terms=(bias,))
    assert scores.dtype == torch.float32
