"""Conservation-law diagnostics: the gradient identity (Thm. 2.2/6.3/6.4), conservation of c under
gradient descent, relative gradient norms, parameter change, the recorder and its plots."""
from __future__ import annotations

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.diagnostics import (ConservationRecorder, balance, gradient_identity, parameter_change,
                             plot_change_fractions, plot_relative_grad_norms, relative_grad_norms, snapshot)
from zoo.symmetry import (attention_grad_dots, incoming_grad_dots, layer_width, outgoing_grad_dots)

matplotlib.use("Agg")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny graphs: one thread avoids OpenMP spin-waiting, which on a busy 2-core CI runner made
    every op ~10x slower; the previous setting is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 5, 0, 6, 7, 4, 8, 9], [1, 0, 2, 1, 3, 2, 4, 3, 4, 3, 7, 6, 6, 9, 8]])
N, IN, OUT = 10, 5, 3

RELU_VARIANTS = {
    "gat_h1": ("gat", {}),
    "gat_h4_bias": ("gat", dict(heads=4, bias=True)),
    "gatv2_shared_h4": ("gatv2", dict(heads=4)),
    "gatv2_unshared_h1": ("gatv2", dict(share_weights=False)),
    "gatv2_unshared_h4": ("gatv2", dict(share_weights=False, heads=4)),
    "gatv2_separate_update": ("gatv2", dict(share_weights=False, update_weight="separate", heads=2)),
    "gatv2_att_bias_bias": ("gatv2", dict(attention_bias=True, bias=True, heads=2)),
    "gatv2_residual_leaky": ("gatv2", dict(residual="linear", heads=2, activation="leaky_relu")),
    "gcn": ("gcn", dict(bias=True)),
    "gcn_residual": ("gcn", dict(normalization="mean", residual="linear")),
    "gatdb": ("gatdb", dict(heads=2)),
    "gatnb_residual": ("gatnb", dict(residual="linear")),
    "gate_h1": ("gate", {}),
    "gate_h2_bias_leaky": ("gate", dict(heads=2, bias=True, negative_slope=0.2)),
    "gate_shared_h2": ("gate", dict(heads=2, share_weights=True)),
}


def random_model(name, seed=0, **kw):
    """A float64 model at random parameters (biases, xi, skips and attention all non-zero)."""
    torch.manual_seed(seed)
    model = zoo.build(name, in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=4, **kw).double()
    x = torch.randn(N, IN, dtype=torch.float64)
    model(EDGES, x)  # materialise GATDB/GATNB biases
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    return model, x


def backward(model, x, seed=0):
    y = torch.randint(0, OUT, (N,), generator=torch.Generator().manual_seed(seed))
    model.zero_grad()
    F.cross_entropy(model(EDGES, x), y).backward()


def term_scale(model):
    """Per hidden layer, |<in, grad in>| + |<a, grad a>| + |<out, grad out>|: the size delta is compared to."""
    groups = model.rescale_groups()
    out = []
    for layer in range(len(groups) - 1):
        n = layer_width(model, layer)
        out.append(incoming_grad_dots(groups[layer], n).abs() + attention_grad_dots(groups[layer], n).abs()
                   + outgoing_grad_dots(groups[layer + 1], n).abs())
    return out


@pytest.mark.parametrize("variant", sorted(RELU_VARIANTS))
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_identity_is_exact_for_homogeneous_activations(variant, seed):
    name, kw = RELU_VARIANTS[variant]
    model, x = random_model(name, seed, **kw)
    backward(model, x, seed)
    deltas, scales = gradient_identity(model), term_scale(model)
    assert len(deltas) == model.num_layers - 1
    for delta, scale in zip(deltas, scales):
        assert float(scale.max()) > 1e-6  # the terms themselves are far from zero
        assert float((delta.abs() / scale.clamp_min(1e-12)).max()) < 1e-10


@pytest.mark.parametrize("name, kw", [("gatv2", {}), ("gat", dict(heads=2)), ("gcn", {})])
def test_gradient_identity_fails_with_elu(name, kw):
    model, x = random_model(name, activation="elu", **kw)
    backward(model, x)
    worst = max(float((d.abs() / s.clamp_min(1e-12)).max()) for d, s in zip(gradient_identity(model),
                                                                            term_scale(model)))
    assert worst > 1e-3


def test_theorem_6_3_needs_target_weights_on_the_outgoing_side():
    """With unshared weights, leaving W_t^{l+1}[:, i] out of the outgoing side (Thm. 6.3 as printed)
    breaks the identity; with it (zoo's groups) delta = 0."""
    model, x = random_model("gatv2", share_weights=False)
    backward(model, x)
    groups = model.rescale_groups()
    for layer in range(model.num_layers - 1):
        n = layer_width(model, layer)
        next_layer = model.layers[layer + 1]
        printed = {"outgoing": [next_layer.lin_src.weight]}
        delta_printed = (incoming_grad_dots(groups[layer], n) - attention_grad_dots(groups[layer], n)
                         - outgoing_grad_dots(printed, n))
        scale = term_scale(model)[layer]
        assert float((delta_printed.abs() / scale).max()) > 1e-3
        assert float((gradient_identity(model)[layer].abs() / scale).max()) < 1e-10


def test_gradient_identity_needs_a_backward_pass():
    model = zoo.build("gat", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=3)
    with pytest.raises(RuntimeError, match="backward"):
        gradient_identity(model)


@pytest.mark.parametrize("name, init, kw", [("gatv2", "xavier", dict(share_weights=False, heads=2)),
                                            ("gatv2", "bal_o", {}), ("gatv2", "bal_x", dict(residual="linear")),
                                            ("gate", "xavier", dict(heads=2)), ("gate", "bal_o", {}),
                                            ("gate", "ll_orthogonal", {})])
def test_gradient_descent_conserves_c(name, init, kw):
    """Plain GD, small learning rate, 100 steps: c moves by O(lr^2) per step, stays within 1e-3 (the
    largest drift, gatv2 with bal_o, is 6.7e-4; the smallest norm change, gatv2 with xavier, 6.5e-3)."""
    torch.manual_seed(0)
    model = zoo.build(name, in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=4, init=init, **kw).double()
    x = torch.randn(N, IN, dtype=torch.float64)
    y = torch.randint(0, OUT, (N,))
    c0 = balance(model)
    w0 = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.004)
    for _ in range(100):
        opt.zero_grad()
        F.cross_entropy(model(EDGES, x), y).backward()
        opt.step()
    for before, after in zip(c0, balance(model)):
        assert float((after - before).abs().max()) < 1e-3
    # the squared norms c is made of changed by far more than the tolerance, so the test can fail
    norm_change = max(float((p.detach().pow(2).sum() - q.pow(2).sum()).abs()) for p, q in zip(model.parameters(), w0))
    assert norm_change > 5e-3


def test_adam_breaks_conservation():
    """Adam's per-coordinate scaling does not follow the gradient, so c drifts (a check that can fail)."""
    torch.manual_seed(0)
    model = zoo.build("gatv2", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=4).double()
    x, y = torch.randn(N, IN, dtype=torch.float64), torch.randint(0, OUT, (N,))
    c0 = balance(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(200):
        opt.zero_grad()
        F.cross_entropy(model(EDGES, x), y).backward()
        opt.step()
    assert max(float((a - b).abs().max()) for a, b in zip(c0, balance(model))) > 1e-3


# ---------------------------------------------------------------------------- trainability diagnostics
def test_relative_grad_norms_match_definition():
    model, x = random_model("gatv2", share_weights=False)
    backward(model, x)
    norms = relative_grad_norms(model)
    assert len(norms) == model.num_layers
    layer = model.layers[2]
    w = [layer.lin_src.weight, layer.lin_dst.weight]
    expected = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in w)) / math.sqrt(sum(float(p.detach().pow(2).sum()) for p in w))
    assert norms[2]["features"] == pytest.approx(expected, rel=1e-12)
    assert norms[2]["attention"] == pytest.approx(float(layer.att.grad.norm() / layer.att.detach().norm()), rel=1e-12)


def test_relative_grad_norms_nan_when_attention_is_zero():
    model = zoo.build("gatv2", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=3, init="bal_o")
    backward(model, torch.randn(N, IN))
    norms = relative_grad_norms(model)
    assert all(math.isnan(r["attention"]) for r in norms)
    assert all(r["features"] > 0 for r in norms)
    gcn = zoo.build("gcn", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=3)
    backward(gcn, torch.randn(N, IN))
    assert all(math.isnan(r["attention"]) for r in relative_grad_norms(gcn))


def test_parameter_change_fractions():
    model = zoo.build("gatv2", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=3)
    before = snapshot(model)
    with torch.no_grad():
        w = model.layers[0].lin_src.weight  # 8 x 5 = 40 weights
        w[:4] *= 1.2                        # 20 weights change by 1 - 1/1.2 = 17% of the new value
        w[4:6] *= 1.01                      # 10 weights change by ~1%: below the threshold
        w[7, 0] = 0.0                       # insignificant after training: excluded
        model.layers[1].att[0, :3] += 0.5   # 3 of 8 attention weights changed
    change = parameter_change(before, model, threshold=0.05, min_magnitude=1e-4)
    assert len(change) == 3
    assert change[0]["features_count"] == 39
    assert change[0]["features"] == pytest.approx(20 / 39)
    assert change[0]["attention"] == 0.0
    assert change[1]["attention"] == pytest.approx(3 / 8)
    assert change[2]["features"] == 0.0
    with pytest.raises(ValueError, match="layers"):
        parameter_change(before[:2], model)


def test_recorder_and_plots():
    torch.manual_seed(0)
    model = zoo.build("gatv2", in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=3, init="xavier")
    x, y = torch.randn(N, IN), torch.randint(0, OUT, (N,))
    rec = ConservationRecorder(model, every=5)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(EDGES, x), y)
        loss.backward()
        rec(epoch, loss=loss.item())
        opt.step()
    epochs, feats = rec.series("features")
    assert epochs.tolist() == [0, 5, 10, 15]
    assert feats.shape == (4, 3) and (feats > 0).all()
    assert len(rec.history[0]["max_abs_delta"]) == 2 and max(rec.history[0]["max_abs_delta"]) < 1e-5
    _, loss = rec.series("loss")
    assert loss.shape == (4,)
    with pytest.raises(KeyError, match="recorded keys"):
        rec.series("nope")
    fig = plot_relative_grad_norms(rec, layers=[0, 2])
    assert len(fig.axes[0].lines) == 2
    fig = plot_relative_grad_norms(rec.history, kind="attention")
    assert len(fig.axes[0].lines) == 3
    change = {"xav": parameter_change(snapshot(model), model), "other": parameter_change(snapshot(model), model)}
    fig = plot_change_fractions(change)
    assert len(fig.axes[0].patches) == 6


def test_relative_grad_norms_before_backward():
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2)
    with pytest.raises(RuntimeError, match="gradient_identity needs gradients"):
        gradient_identity(model)
    with pytest.raises(RuntimeError, match="relative_grad_norms needs gradients: call loss.backward"):
        relative_grad_norms(model)
    model(torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 3)).sum().backward()
    assert len(relative_grad_norms(model)) == 2
