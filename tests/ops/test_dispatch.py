"""zoo.ops.dispatch keeps each family's rule for the fused kernels (which op runs, not the numbers:
tests/ops/test_score_*.py and test_aggregate.py check those)."""
from __future__ import annotations

import pytest
import torch
from torch.func import vmap

import zoo
import zoo.ops
from tests.conftest import awkward_graph
from zoo.graph import as_graph
from zoo.ops import dispatch
from zoo.ops._custom import HAS_CUSTOM_OPS

# the torch-op kernels (the dispatch would otherwise prefer the compiled attention)
pytestmark = pytest.mark.usefixtures("torch_op_kernels")


@pytest.fixture
def taken(monkeypatch):
    """Names of the fused kernels the dispatch called."""
    calls = []
    for name in ("node_scores", "gat_edge_scores", "gatv2_score", "edge_attention"):
        original = getattr(dispatch, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(dispatch, name, spy)
    return calls


def _run(name, train=True, **options):
    edge_index, n = awkward_graph()
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=2, heads=2, **options)
    model.train(train)
    model(edge_index, torch.randn(n, 6))


def test_gat_score_kernel_ignores_the_size_threshold(taken):
    """GAT checks only the score switch for its score: a tiny graph at the default threshold still
    uses the score kernels, while the aggregation (size threshold) stays plain."""
    with zoo.ops.fused(True):
        _run("gat")
    assert set(taken) == {"node_scores", "gat_edge_scores"}


def test_gatv2_score_kernel_needs_the_size_threshold(taken):
    with zoo.ops.fused(True):
        _run("gatv2")
    assert taken == []
    with zoo.ops.fused(True, min_elements=0):
        _run("gatv2")
    assert set(taken) == {"gatv2_score", "edge_attention"}


@pytest.mark.parametrize("name", ["gat", "gatv2"])
def test_attention_dropout_keeps_the_fused_kernels(name, taken):
    """The fused aggregation takes the dropout mask; GATv2's fused score comes before the dropout,
    which acts on alpha, so it is taken too."""
    with zoo.ops.fused(True, min_elements=0):
        _run(name, attn_dropout=0.5)
    assert "edge_attention" in taken and ("gatv2_score" in taken) == (name == "gatv2")


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4)")
def test_under_attention_dropout_the_size_rule_holds_under_vmap_too():
    """While dropout is live a tiny graph stays plain stacked or alone (a replica's numbers bitwise its
    own alone); without dropout vmap always fuses."""
    edge_index, n = awkward_graph()
    g = as_graph(edge_index, torch.randn(n, 6), "add")
    values = torch.randn(n, 2, 3)
    size = g.num_edges * 6
    stacked = values.expand(2, -1, -1, -1)

    def rule(dropping):
        fuses = vmap(lambda v: torch.tensor(dispatch.fuses_aggregation(g.num_edges, v, dropping)))(stacked)
        return bool(fuses.all())

    with zoo.ops.fused(True, min_elements=size + 1):
        assert not rule(True) and rule(False)
        assert not dispatch.fuses_aggregation(g.num_edges, values, True)
    with zoo.ops.fused(True, min_elements=size):
        assert rule(True) and dispatch.fuses_aggregation(g.num_edges, values, True)
    with zoo.ops.fused("score", min_elements=0):
        assert not rule(True) and not rule(False)


def test_gat_score_kernel_runs_under_attention_dropout(taken):
    """GAT's score rule has no dropout clause (GATv2's has): kept as it was."""
    with zoo.ops.fused(True, min_elements=0):
        _run("gat", attn_dropout=0.5)
    assert {"node_scores", "gat_edge_scores"} <= set(taken)


@pytest.mark.parametrize("kernels, expected", [(False, set()), ("score", {"node_scores", "gat_edge_scores"}),
                                               ("aggregate", {"edge_attention"})])
def test_the_switch_picks_the_kernels(kernels, expected, taken):
    with zoo.ops.fused(kernels, min_elements=0):
        _run("gat")
    assert set(taken) == expected


@pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="needs torch.library.custom_op (torch >= 2.4); the fallback is tests/ops/test_fallback.py")
def test_size_rule_counts_edges_heads_and_channels_and_vmap_always_fuses():
    edge_index, n = awkward_graph()
    g = as_graph(edge_index, torch.randn(n, 6), "add")
    values = torch.randn(n, 2, 3)
    size = g.num_edges * 6
    with zoo.ops.fused(True, min_elements=size):
        assert dispatch.large_enough(g.num_edges, values)
    with zoo.ops.fused(True, min_elements=size + 1):
        assert not dispatch.large_enough(g.num_edges, values)
        assert bool(vmap(lambda v: torch.tensor(dispatch.large_enough(g.num_edges, v)))(values.expand(2, -1, -1, -1)).all())
