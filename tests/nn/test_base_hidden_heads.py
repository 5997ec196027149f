"""``hidden_heads``: hidden layers' heads concatenated (Veličković et al.) or averaged (LipschitzNorm §10.3's other
aggregator), on every attention family."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.registry import MODELS, constructor_options, list_models
from tests.conftest import awkward_graph


def _attention_families():
    """The registered deep models with attention heads (the rule of conftest.small_kwargs, for hidden_heads)."""
    return [name for name in list_models() if "hidden_heads" in constructor_options(MODELS.get(name))
            and getattr(MODELS.get(name), "supports_heads", True)]


def test_gat_hidden_layers_average_heads_of_hidden_dim_channels():
    model = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=6, heads=4, num_layers=3, hidden_heads="mean")
    assert [(layer.heads, layer.channels, layer.concat) for layer in model.layers] == [(4, 6, False), (4, 6, False),
                                                                                       (4, 3, False)]
    edge_index, n = awkward_graph()
    out = model(edge_index, torch.randn(n, 5))
    assert out.shape == (n, 3) and torch.isfinite(out).all()
    out.square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_an_averaged_layer_is_the_mean_of_its_heads():
    """The same weights as a concatenating layer: the averaged output is the concatenated one's per-head mean."""
    mean = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=8, heads=4, num_layers=2, hidden_heads="mean")
    concat = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=32, heads=4, num_layers=2)
    concat.layers[0].load_state_dict(mean.layers[0].state_dict())
    edge_index, n = awkward_graph()
    x = torch.randn(n, 5)
    g = as_graph(edge_index, x, "add")
    averaged, _ = mean.layers[0](g, x)
    stacked, _ = concat.layers[0](g, x)
    assert averaged.shape == (n, 8)
    assert torch.allclose(averaged, stacked.view(n, 4, 8).mean(1), atol=1e-6)


def test_one_head_averaged_is_one_head_concatenated():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 5)
    torch.manual_seed(1)
    a = zoo.build("gatv2", in_dim=5, out_dim=3, hidden_dim=8, num_layers=3, hidden_heads="mean")
    torch.manual_seed(1)
    b = zoo.build("gatv2", in_dim=5, out_dim=3, hidden_dim=8, num_layers=3)
    assert torch.allclose(a(edge_index, x), b(edge_index, x))


@pytest.mark.parametrize("name", _attention_families())
def test_every_attention_family_averages_hidden_heads(name):
    model = zoo.build(name, in_dim=5, out_dim=3, hidden_dim=4, heads=2, num_layers=2, hidden_heads="mean")
    edge_index, n = awkward_graph()
    assert model(edge_index, torch.randn(n, 5)).shape == (n, 3)


def test_attention_families_are_found():
    assert {"gat", "gatv2"} <= set(_attention_families())


def test_averaged_heads_need_no_divisible_width_and_refuse_the_conservation_law():
    model = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=6, heads=4, num_layers=2, hidden_heads="mean",
                      activation="relu")
    assert any("averaged hidden heads" in r for r in model.conservation_law_violations())
    assert "hidden_heads='mean'" in repr(model)
    with pytest.raises(ValueError, match="averaged hidden heads"):
        zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=6, heads=2, num_layers=2, hidden_heads="mean", init="bal_o")
    with pytest.raises(ValueError, match="not divisible by heads"):
        zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=6, heads=4, num_layers=2)


def test_bad_hidden_heads_is_one_clear_line():
    with pytest.raises(ValueError, match="hidden_heads"):
        zoo.build("gat", in_dim=5, out_dim=3, hidden_heads="avg")
    with pytest.raises(ValueError, match="no attention heads to average"):
        zoo.build("ggnn", in_dim=5, out_dim=3, hidden_heads="mean")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", _attention_families())
def test_averaged_heads_on_cuda_match_cpu(name):
    """Devices and dtypes follow the inputs: the same weights give the same outputs on CUDA, gradients reach all."""
    kw = dict(in_dim=5, out_dim=3, hidden_dim=6, heads=4, num_layers=3, hidden_heads="mean", residual="identity")
    edge_index, n = awkward_graph()
    x = torch.randn(n, 5, dtype=torch.float64)
    cpu = zoo.build(name, **kw).double()
    gpu = zoo.build(name, **kw).double().cuda()
    expected = cpu(edge_index, x)  # materialises graph-tied (lazy) parameters, e.g. GATDB's per-edge biases
    gpu(edge_index.cuda(), x.cuda())
    gpu.load_state_dict(cpu.state_dict())
    out = gpu(edge_index.cuda(), x.cuda())
    out.square().sum().backward()
    assert out.is_cuda and out.dtype == torch.float64 and torch.allclose(out.cpu(), expected, atol=1e-9)
    assert all(p.grad is not None for p in gpu.parameters())
