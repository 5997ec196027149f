"""Norm plugins: LipschitzNorm bounds and gradients, PairNorm statistics, LayerNorm, errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.graph import as_graph
from zoo.norms.scores import AdditiveScores
from zoo.norms.pairnorm import PairNorm


def random_graph(n: int, m: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    return torch.cat([ei, ei.flip(0)], dim=1)


def test_list_norms():
    assert {"lipschitz", "pairnorm", "layernorm", "none"} <= set(zoo.list_norms())


def capture(plugin, method):
    """Wrap ``plugin.method`` to record the normalised scores it returns (and its arguments)."""
    seen, calls = [], []
    original = getattr(plugin, method)

    def wrapped(*args):
        out = original(*args)
        seen.append(out.detach())
        calls.append(args)
        return out

    setattr(plugin, method, wrapped)
    return seen, calls


@pytest.mark.parametrize("name,record", [("gat", "AdditiveScores"), ("gatv2", "MLPScores"),
                                         ("unimp", "DotProductScores"), ("graph_transformer", "DotProductScores")])
@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_lipschitz_scores_bounded_for_huge_inputs(name, record, alpha):
    ei = random_graph(30, 60)
    x = torch.randn(30, 6) * 1e6
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=3, heads=2,
                      norm="lipschitz", norm_kwargs={"alpha": alpha}, **({"pe_dim": 0} if "transformer" in name else {}))
    seen, records = capture(model.norm_plugin, "normalize")
    out = model(ei, x)
    assert {type(r[0]).__name__ for r in records} == {record}  # the layers pass their kind's record
    assert torch.isfinite(out).all()
    assert len(seen) == 3
    for scores in seen:
        assert scores.abs().max() <= alpha * (1 + 1e-5)
        assert scores.abs().max() > 0.05 * alpha  # not trivially zero
    # the same model without the norm produces scores far beyond alpha (so the bound is the norm's doing)
    plain = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=3, heads=2,
                      **({"pe_dim": 0} if "transformer" in name else {}))
    layer = plain.layers[0]
    g = as_graph(ei, x, "add")
    h = layer.lin(x).view(30, 2, -1) if name == "gat" else None
    if h is not None:
        raw = (h * layer.att_src).sum(-1)[g.src] + (h * layer.att_dst).sum(-1)[g.dst]
        assert raw.abs().max() > 1e3


def test_lipschitz_gat_matches_equation_17_neighbourwise():
    """Direct check of Eq. 17 per head and per destination on a tiny graph."""
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 1, 0]])
    x = torch.randn(3, 4)
    model = zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=4, num_layers=1, heads=2, norm="lipschitz")
    layer = model.layers[0]
    g = as_graph(ei, x, "add")
    xw = layer.lin(x).view(3, 2, -1)
    raw = (xw * layer.att_src).sum(-1)[g.src] + (xw * layer.att_dst).sum(-1)[g.dst]
    got = model.norm_plugin.normalize(AdditiveScores(g, xw, layer.att_src, layer.att_dst, raw))
    a = torch.cat([layer.att_src, layer.att_dst], -1).norm(dim=-1)
    for e in range(g.num_edges):
        v = int(g.dst[e])
        nbrs = g.src[g.dst == v]
        for h in range(2):
            bound = max(torch.cat([xw[u, h], xw[v, h]]).norm() for u in nbrs)
            torch.testing.assert_close(got[e, h], raw[e, h] / (a[h] * bound))


def attention_grad_history(norm, steps: int = 25, seed: int = 0):
    torch.manual_seed(seed)
    n = 40
    ei = random_graph(n, 80, seed)
    x, y = torch.randn(n, 16), torch.randint(0, 3, (n,))
    model = zoo.build("gat", in_dim=16, out_dim=3, hidden_dim=16, num_layers=20, norm=norm)
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    att = [p for layer in model.layers for p in (layer.att_src, layer.att_dst)]
    history = []
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(ei, x), y).backward()
        history.append(max(float(p.grad.norm()) for p in att))
        opt.step()
    return history


def test_lipschitz_keeps_deep_gat_attention_gradients_small():
    """Fig. 2 of the LipschitzNorm paper, in miniature: train two 20-layer GATs from the same seed
    and compare the largest attention-parameter gradient norm seen during training."""
    plain = attention_grad_history(None)
    lip = attention_grad_history("lipschitz")
    assert all(map(lambda v: v == v, lip)), "NaN gradient with lipschitz"
    assert max(plain) > 100 * plain[0], "the unnormalised model's attention gradients should grow in training"
    assert max(plain) > 3 * max(lip), (max(plain), max(lip))


def test_pairnorm_pn_statistics():
    x = torch.randn(50, 8) * 3 + 5
    for s in (1.0, 2.5):
        out = PairNorm("PN", scale=s)(x)
        torch.testing.assert_close(out.mean(0), torch.zeros(8), atol=1e-5, rtol=0)
        # PN fixes the root-mean-square row norm: sqrt(mean_i ||x_i||^2) = s
        torch.testing.assert_close(out.pow(2).sum(-1).mean().sqrt(), torch.tensor(s), atol=1e-4, rtol=1e-4)


def test_pairnorm_si_and_scs():
    x = torch.randn(50, 8) * 3 + 5
    out = PairNorm("PN-SI", scale=2.0)(x)
    torch.testing.assert_close(out.norm(dim=-1), torch.full((50,), 2.0), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out.mean(0) * 0, torch.zeros(8))
    out = PairNorm("PN-SCS", scale=2.0)(x)
    expected = 2.0 * x / x.norm(dim=-1, keepdim=True) - x.mean(0)
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


def test_pairnorm_in_a_model_and_placement():
    ei = random_graph(20, 40)
    x = torch.randn(20, 6)
    for placement in ("pre", "post"):
        m = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, num_layers=3,
                      norm="pairnorm", norm_kwargs={"mode": "PN-SI", "scale": 2.0, "placement": placement})
        assert isinstance(m.norms[0], PairNorm) and m.norm_plugin.placement == placement
        assert torch.isfinite(m(ei, x)).all()


def test_layernorm_is_per_node():
    m = zoo.build("gcn", in_dim=6, out_dim=3, hidden_dim=8, num_layers=2, norm="layernorm")
    ln = m.norms[0]
    x = torch.randn(10, 8)
    out = ln(x)
    torch.testing.assert_close(out[:3], ln(x[:3]))
    torch.testing.assert_close(out.mean(-1), torch.zeros(10), atol=1e-5, rtol=0)


def test_norm_errors_are_clear():
    with pytest.raises(ValueError, match="no attention scores"):
        zoo.build("gcn", in_dim=6, out_dim=3, norm="lipschitz")
    with pytest.raises(ValueError, match="PN-SI"):
        zoo.build("gat", in_dim=6, out_dim=3, norm="pairnorm", norm_kwargs={"mode": "PN-S"})
    with pytest.raises(ValueError, match="placement"):
        zoo.build("gat", in_dim=6, out_dim=3, norm="layernorm", norm_kwargs={"placement": "middle"})
    with pytest.raises(ValueError, match="alpha"):
        zoo.build("gat", in_dim=6, out_dim=3, norm="lipschitz", norm_kwargs={"alpha": -1})
    with pytest.raises(TypeError, match="alpha"):
        zoo.build("gat", in_dim=6, out_dim=3, norm="lipschitz", norm_kwargs={"alfa": 1})
