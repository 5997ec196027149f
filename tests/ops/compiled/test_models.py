"""Whole models through the dispatch: the compiled attention (C++) equals the plain ops at float64 to
1e-10 — outputs and every parameter's gradient, one replica and three under vmap, and training —
for GAT, GATv2 (shared, unshared, separate update), GATDB and GATNB, and GAT / GATDB with LipschitzNorm (a
score norm); it needs no size threshold
and keeps no (E, H, C) tensor for the backward."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

import zoo
from tests.conftest import seeded_double_models
from tests.ops.compiled.cases import TOL, hub_graph
from tests.ops.test_memory_saved import _saved_ehc
from zoo.graph import as_graph
from zoo.ops import fused
from zoo.ops._compiled import ops

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ attention kernels could not be built here (no compiler?)")

MODELS = [("gat", {}), ("gatv2", {}), ("gatv2", dict(share_weights=False)),
          ("gatv2", dict(share_weights=False, update_weight="separate")), ("gatv2", dict(attention_bias=True)),
          ("gatdb", {}), ("gatnb", {}),
          # a score norm's normalised scores enter the compiled op as its edge term (GATDB: its bias added after)
          ("gat", dict(norm="lipschitz")), ("gat", dict(norm="lipschitz", norm_kwargs={"variant": "authors_code"})),
          ("gatdb", dict(norm="lipschitz"))]


@pytest.fixture
def compiled_calls(monkeypatch):
    calls = []
    for name in ("gat_attention", "gatv2_attention"):
        original = getattr(ops, name)

        def spy(*args, _original=original, **kwargs):
            calls.append(1)
            return _original(*args, **kwargs)

        monkeypatch.setattr(ops, name, spy)
    return calls


def _nudge_biases(models):
    """GATDB/GATNB start with zero biases (= GAT), GATv2 with a zero attention bias: give them values
    so the edge term and the bias are exercised."""
    for i, m in enumerate(models):
        for name, p in m.named_parameters():
            if name.endswith(("xi", "att_bias")):
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(i), dtype=p.dtype))


@pytest.mark.parametrize("name,options", MODELS, ids=[f"{n}-{'-'.join(map(str, o.values())) or 'default'}"
                                                      for n, o in MODELS])
def test_models_compiled_equal_plain_with_and_without_vmap(name, options, compiled_calls):
    edge_index, n = hub_graph(extra=6)
    x = torch.randn(n, 6, dtype=torch.float64)
    models = seeded_double_models(name, heads=2, **options)
    for m in models:  # GATDB/GATNB: materialise the graph's biases
        m(edge_index, x)
    _nudge_biases(models)
    compiled_calls.clear()

    def run(choice):
        with fused(choice):  # default threshold: the compiled op ignores it (tiny graph, one replica)
            params, buffers = stack_module_state(models)
            single = models[0](edge_index, x)
            g_single = torch.autograd.grad(single.square().sum(), list(models[0].parameters()))
            stacked = vmap(lambda p, b: functional_call(models[0], (p, b), (edge_index, x)))(params, buffers)
            g_stacked = torch.autograd.grad(stacked.square().sum(), list(params.values()))
        return (single, stacked) + g_single + g_stacked

    plain = run(False)
    assert not compiled_calls
    compiled = run(True)
    assert len(compiled_calls) == 2 * 3  # every layer, one replica and stacked
    for a, b in zip(compiled, plain):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("name", ["gat", "gatv2", "gatdb"])
def test_training_compiled_equals_plain(name):
    edge_index, n = hub_graph(extra=6)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 6, dtype=torch.float64, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)

    def train(choice):
        (model,) = seeded_double_models(name, seeds=(0,), heads=2)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        with fused(choice):
            for _ in range(5):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(edge_index, x), y).backward()
                opt.step()
        return list(model.parameters())

    for a, b in zip(train(True), train(False)):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("name,options", [("gat", {}), ("gatv2", {}), ("gatv2", dict(attention_bias=True)),
                                          ("gatdb", {})])
def test_attention_dropout_while_training_runs_in_the_compiled_op(name, options, compiled_calls):
    """The C++ op applies attention dropout's mask itself: the same masks as the torch ops draw (the
    same stream, the same point), outputs and gradients equal at float64 to 1e-10."""
    edge_index, n = hub_graph(extra=6)
    x = torch.randn(n, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    (model,) = seeded_double_models(name, seeds=(0,), heads=2, attn_dropout=0.5, **options)
    model(edge_index, x)  # GATDB: materialise the graph's biases
    _nudge_biases([model])

    def run(compiled):
        with fused(True, min_elements=0, compiled=compiled):
            torch.manual_seed(7)
            out = model(edge_index, x)
            return (out,) + torch.autograd.grad(out.square().sum(), list(model.parameters()))

    compiled_calls.clear()
    plain = run(False)
    assert not compiled_calls
    got = run(True)
    assert len(compiled_calls) == 3
    for a, b in zip(got, plain):
        torch.testing.assert_close(a, b, **TOL)
    model.eval()  # no dropout: the compiled op without a mask
    compiled_calls.clear()
    model(edge_index, x)
    assert len(compiled_calls) == 3


def test_zoo_kernels_off_keeps_the_torch_ops(compiled_calls, monkeypatch):
    monkeypatch.setenv("ZOO_KERNELS", "off")
    edge_index, n = hub_graph(extra=6)
    with fused(True):
        zoo.build("gatv2", in_dim=6, out_dim=3, hidden_dim=8, num_layers=2)(edge_index, torch.randn(n, 6))
    assert not compiled_calls


def test_compiled_layers_keep_no_edge_by_channel_tensor():
    """The torch-op path keeps one (GAT) or two (GATv2) (E, H, C) tensors per layer; the compiled none."""
    torch.manual_seed(0)
    n, heads, ch = 2000, 4, 16
    ei = torch.randint(0, n, (2, 20_000))
    x = torch.randn(n, 8)
    with fused(True):
        for name in ("gat", "gatv2"):
            model = zoo.build(name, in_dim=8, out_dim=3, hidden_dim=heads * ch, heads=heads, num_layers=3, out_heads=1)
            g = as_graph(ei, x, model.self_loops)
            _, saved = _saved_ehc(lambda: model(g, x), g.num_edges, heads, ch)
            assert not saved, (name, list(saved.values()))
