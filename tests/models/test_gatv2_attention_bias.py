"""GATv2's attention bias b (the Oxford report's variant (a) against (b)) is live: it sits inside
the LeakyReLU, so it does not cancel in the softmax the way a constant added to every score of a
neighbourhood would."""
from __future__ import annotations

import torch

from zoo.graph import as_graph
from zoo.models.gatv2 import GATv2Layer


def _layer_and_graph():
    torch.manual_seed(0)
    x = torch.randn(30, 16)
    graph = as_graph(torch.randint(0, 30, (2, 120)), x)
    return GATv2Layer(16, 8, heads=2, attention_bias=True), graph, x


def test_a_nonzero_attention_bias_changes_the_coefficients_and_the_output():
    layer, graph, x = _layer_and_graph()
    out0, alpha0 = layer(graph, x)
    with torch.no_grad():
        layer.att_bias.normal_()
    out1, alpha1 = layer(graph, x)
    assert (alpha1 - alpha0).abs().max() > 1e-2 and (out1 - out0).abs().max() > 1e-2


def test_the_attention_bias_gets_a_gradient_at_its_zero_initialisation():
    layer, graph, x = _layer_and_graph()
    assert torch.count_nonzero(layer.att_bias) == 0
    out, _ = layer(graph, x)
    out.square().sum().backward()
    assert layer.att_bias.grad.abs().max() > 1e-3


def test_a_constant_added_to_every_score_cancels():
    """The contrast: b outside the LeakyReLU would be such a constant; the coefficients would not move."""
    scores = torch.randn(5)
    assert torch.allclose(torch.softmax(scores, 0), torch.softmax(scores + 3.7, 0))
