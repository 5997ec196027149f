"""Residual options and very deep stacks."""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import awkward_graph


@pytest.mark.parametrize("name", ["gat", "gatv2", "gcn"])
def test_linear_residual_starts_at_zero_and_then_learns(name):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6)
    plain = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=4)
    skip = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=4, residual="linear")
    plain.load_state_dict({k: v for k, v in skip.state_dict().items() if not k.startswith("skips.")})
    assert len(skip.skips) == 4 and all(torch.count_nonzero(s.weight) == 0 for s in skip.skips)
    torch.testing.assert_close(skip(edge_index, x), plain(edge_index, x))  # zero skips: same function
    skip(edge_index, x).pow(2).sum().backward()
    assert all(s.weight.grad.abs().sum() > 0 for s in skip.skips)


def test_identity_residual_adds_the_input_where_widths_match():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 8)
    model = zoo.build("gat", in_dim=8, out_dim=8, hidden_dim=8, num_layers=1, residual="identity",
                      activation="identity")
    base = zoo.build("gat", in_dim=8, out_dim=8, hidden_dim=8, num_layers=1, activation="identity")
    base.load_state_dict(model.state_dict())
    torch.testing.assert_close(model(edge_index, x), base(edge_index, x) + x)


@pytest.mark.parametrize("name", ["gatv2", "gcn"])
def test_256_layers_build_run_and_backpropagate(name):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6)
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=256)
    out = model(edge_index, x)
    assert out.shape == (n, 3) and torch.isfinite(out).all()
    out.sum().backward()
    assert model.layers[0].incoming_params()[0].grad is not None


def test_layer_skipping_for_pruning():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6)
    model = zoo.build("gatv2", in_dim=6, out_dim=3, hidden_dim=8, num_layers=4).eval()
    full = model(edge_index, x)
    model.skipped_layers = {2}
    pruned = model(edge_index, x)
    assert pruned.shape == full.shape and not torch.allclose(pruned, full)
    model.skipped_layers = {0}
    with pytest.raises(ValueError, match="changes the width"):
        model(edge_index, x)
