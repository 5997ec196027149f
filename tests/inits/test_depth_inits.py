"""large_variance (Epping et al.), g_init (Kaiming through the propagation) and spoginit, each
against its equation; the conservation diagnostics read all three through LayerProtocol."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.diagnostics import balance, gradient_identity
from zoo.inits import init_incompatibility
from zoo.inits.deferred import pending
from zoo.inits.spoginit import (SearchOptions, SignalPropagation, sym_propagate, graph_embedding_variation,
                               spoginit_search_)
from zoo.inits.variance import propagation_energy


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def ring(n: int = 40) -> torch.Tensor:
    """An undirected ring: every node has degree 2 (3 with its self-loop)."""
    i = torch.arange(n)
    return torch.cat([torch.stack([i, (i + 1) % n]), torch.stack([(i + 1) % n, i])], 1)


def test_large_variance_draws_sigma_w2_over_fan_in():
    torch.manual_seed(0)
    model = zoo.build("gcn", in_dim=300, out_dim=3, hidden_dim=400, num_layers=3, bias=True,
                      init="large_variance", init_kwargs={"sigma_w2": 3.0, "sigma_b2": 0.25})
    for layer in model.layers:
        w = layer.lin.weight
        assert w.var().item() == pytest.approx(3.0 / w.shape[1], rel=4 * (2 / w.numel()) ** 0.5)
        assert abs(w.mean().item()) < 3 * (3.0 / w.shape[1] / w.numel()) ** 0.5 + 1e-3
    hidden_bias = model.layers[1].bias
    assert hidden_bias.var().item() == pytest.approx(0.25, rel=0.35)


def test_large_variance_refuses_models_without_layer_protocol_and_bad_options():
    model = zoo.build("graph_transformer", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2)
    assert "LayerProtocol" in init_incompatibility(model, "large_variance")
    with pytest.raises(ValueError, match="sigma_w2"):
        zoo.build("gcn", in_dim=4, out_dim=2, init="large_variance", init_kwargs={"sigma_w2": -1.0})


def test_propagation_energy_is_mean_sum_of_squared_coefficients():
    edges = torch.tensor([[0, 1, 2, 0], [1, 1, 1, 2]])
    alpha = torch.tensor([[0.5], [0.25], [0.25], [1.0]])
    # node 1: 0.25 + 0.0625 + 0.0625; node 2: 1; node 0 has no incoming edge
    assert propagation_energy(edges, alpha, 3) == pytest.approx((0.375 + 1.0) / 2)


def test_g_init_runs_at_the_first_forward_with_kaiming_variance_through_the_propagation():
    torch.manual_seed(0)
    n, width = 40, 300
    model = zoo.build("gcn", in_dim=width, out_dim=3, hidden_dim=width, num_layers=3, init="g_init")
    assert pending(model)
    model(ring(n), torch.randn(n, width))
    assert not pending(model)
    s = 3 * (1 / 3) ** 2  # a ring with self-loops: c_uv = 1/3 over 3 neighbours
    for layer in model.layers:
        w = layer.lin.weight
        assert w.var().item() == pytest.approx(2.0 / (w.shape[1] * s), rel=4 * (2 / w.numel()) ** 0.5)


def test_gev_of_an_eigenvector_is_half_one_minus_its_eigenvalue():
    n = 40
    edges = ring(n)
    k = 3
    v = torch.cos(2 * torch.pi * k * torch.arange(n, dtype=torch.float64) / n)
    lam = (1 + 2 * torch.cos(torch.tensor(2 * torch.pi * k / n, dtype=torch.float64))) / 3
    torch.testing.assert_close(sym_propagate(edges, n, v[:, None])[:, 0], lam * v)
    x = torch.stack([v, torch.ones(n, dtype=torch.float64)], 1)  # constant column: P 1 = 1 on a regular graph
    assert graph_embedding_variation(x, edges).item() == pytest.approx(0.5 * (0.5 * (1 - lam.item()) + 0.0))


def test_spoginit_terms_follow_their_equations():
    torch.manual_seed(0)
    n = 40
    edges, x = ring(n), torch.randn(n, 6)
    model = zoo.build("gcn", in_dim=6, out_dim=3, hidden_dim=16, num_layers=5)
    probe = SignalPropagation(model, edges, x, SearchOptions(random_data=False), torch.Generator().manual_seed(0))
    y = probe.fixed[1]
    terms = probe.terms(x, y)
    outs = []
    hooks = [t.register_forward_hook(lambda m, i, o: outs.append(o)) for t in model.taps]
    out = model(edges, x)
    for h in hooks:
        h.remove()
    loss = torch.nn.functional.cross_entropy(out, y)
    g = torch.autograd.grad(loss, [layer.lin.weight for layer in model.layers])
    # FSP and GEV read the hidden outputs H^1 .. H^{L-1} (the authors' MyGCN.print_all_x), not the logits
    hidden = outs[:-1]
    assert terms["fsp"] == pytest.approx(((hidden[0].norm() / hidden[-1].norm() - 1) ** 2).item(), rel=1e-5)
    assert terms["bsp"] == pytest.approx(((g[1].norm() / g[-2].norm() - 1) ** 2).item(), rel=1e-5)
    assert terms["gev"] == pytest.approx(graph_embedding_variation(hidden[-1].detach(), edges).item(), rel=1e-5)
    # output_layer=True: the Cora notebook's MyGCN, whose list ends with the logits
    notebook = SignalPropagation(model, edges, x, SearchOptions(random_data=False, output_layer=True),
                                 torch.Generator().manual_seed(0)).terms(x, y)
    assert notebook["fsp"] == pytest.approx(((outs[0].norm() / outs[-1].norm() - 1) ** 2).item(), rel=1e-5)
    assert notebook["gev"] == pytest.approx(graph_embedding_variation(outs[-1].detach(), edges).item(), rel=1e-5)


def test_spoginit_steps_follow_one_probe_as_the_authors_code():
    """The code's three-probe loop resets its estimate each pass: one direction steers a step,
    s_l <- s_l - lr sign((M(s + delta z) - M(s)) / (delta z_l))."""
    torch.manual_seed(0)
    edges, x = ring(40), torch.randn(40, 6)
    model = zoo.build("gcn", in_dim=6, out_dim=3, hidden_dim=16, num_layers=5)
    assert SearchOptions().probes == 1
    weights = torch.tensor([1.0, -2.0, 3.0, -4.0, 5.0], dtype=torch.float64)
    norms = []

    def linear_metric(self, xs, ys, gev_in):  # a known M: linear in the layers' weight norms
        n = torch.stack([layer.lin.weight.detach().norm() for layer in self.model.layers]).double()
        norms.append(n)
        return float((weights * n).sum())

    original = SignalPropagation.metric
    SignalPropagation.metric = linear_metric
    try:
        spoginit_search_(model, edges, x, SearchOptions(steps=2, patience=5))
    finally:
        SignalPropagation.metric = original
    assert len(norms) == 4  # per step: M(s) and one probe M(s + delta z)
    delta_z = norms[1] / norms[0] - 1
    step = -0.05 * torch.sign(float((weights * (norms[1] - norms[0])).sum()) / delta_z)
    torch.testing.assert_close(norms[2] / norms[0] - 1, step, atol=1e-5, rtol=0)  # s after the first step


def test_spoginit_scales_leave_a_relu_gcn_directions_unchanged():
    """ReLU is positively homogeneous: per-layer scales only rescale H^l (GEV, directions fixed)."""
    torch.manual_seed(0)
    edges, x = ring(40), torch.randn(40, 6)
    model = zoo.build("gcn", in_dim=6, out_dim=3, hidden_dim=16, num_layers=6, activation="relu")
    probe = SignalPropagation(model, edges, x, SearchOptions(random_data=False), torch.Generator().manual_seed(0))
    before = probe.terms(x, probe.fixed[1])["gev"]
    with torch.no_grad():
        for layer, f in zip(model.layers, [0.5, 1.7, 0.9, 1.3, 1.1, 0.8]):
            layer.lin.weight.mul_(f)
    assert probe.terms(x, probe.fixed[1])["gev"] == pytest.approx(before, rel=1e-4)


def test_spoginit_scales_whole_layers_and_keeps_its_best_metric():
    n = 40
    edges, x = ring(n), torch.randn(n, 6)
    kw = dict(in_dim=6, out_dim=3, hidden_dim=16, num_layers=6)
    torch.manual_seed(1)
    base = zoo.build("gcn", **kw)
    before = [layer.lin.weight.detach().clone() for layer in base.layers]
    result = spoginit_search_(base, edges, x, SearchOptions(steps=8, patience=8))
    assert result.best <= result.first
    for layer, b, f in zip(base.layers, before, result.scales.tolist()):
        # one scale per layer: the Xavier directions are kept
        torch.testing.assert_close(layer.lin.weight, b * f)
    torch.manual_seed(1)
    deferred = zoo.build("gcn", init="spoginit", init_kwargs={"steps": 2}, **kw)
    assert pending(deferred)
    deferred(edges, x)
    assert not pending(deferred)


@pytest.mark.parametrize("init", ["large_variance", "g_init", "spoginit"])
def test_conservation_diagnostics_read_the_new_inits(init):
    torch.manual_seed(0)
    options = {"steps": 2} if init == "spoginit" else None
    model = zoo.build("gatv2", in_dim=5, out_dim=3, hidden_dim=8, num_layers=4, init=init, init_kwargs=options)
    # float64: the identity is exact, and in float32 its rounding grows with the init's weight scale
    # (G-Init's larger draws on this ring left 1.6e-3 in float32)
    out = model.double()(ring(12), torch.randn(12, 5, dtype=torch.float64))
    out.square().sum().backward()
    cs = balance(model)
    assert len(cs) == 3 and all(torch.isfinite(c).all() for c in cs)
    # the gradient identity (Eq. 7) holds whatever the init: the law is about gradients, not values
    for delta in gradient_identity(model):
        assert delta.abs().max().item() < 1e-9


def test_loaded_weights_cancel_a_pending_data_init():
    torch.manual_seed(0)
    trained = zoo.build("gcn", in_dim=5, out_dim=3, hidden_dim=8, num_layers=3)
    model = zoo.build("gcn", in_dim=5, out_dim=3, hidden_dim=8, num_layers=3, init="g_init")
    assert pending(model)
    model.load_state_dict(trained.state_dict())
    assert not pending(model)
    model(ring(12), torch.randn(12, 5))  # the loaded weights stay
    for a, b in zip(model.parameters(), trained.parameters()):
        torch.testing.assert_close(a, b)
