"""The ``mu`` reading of the nonlocal factor (nonlocal-MP paper §2 / §4.1).

§4.1 multiplies each head by "the Laplacian energy (1/n)||P_i X - X||^2"; §2 defines the Laplacian
energy on a weighted graph as (1/n) sum_i mu_i |Delta_mu X(i)|^2 and reads the attention P^k as the
aggregation matrix of the graph with omega_ij = exp(e_ij), mu_i = exp(e_ii) + sum_l exp(e_il).
``nonlocal_norm="mu"`` is that second reading.
"""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.diagnostics import laplacian_energy
from zoo.graph import as_graph
from zoo.models.transformer import GraphSelfAttention
from tests.conftest import awkward_graph


def dense_mu_factor(layer: GraphSelfAttention, g, x: torch.Tensor) -> torch.Tensor:
    """(1/n) sum_i mu_i |P_h X(i) - X(i)|^2 per head, from dense score matrices."""
    n, heads, c = g.num_nodes, layer.heads, layer.channels
    q = layer.lin_query(x).view(n, heads, c)
    k = layer.lin_key(x).view(n, heads, c)
    out = []
    for h in range(heads):
        omega = torch.zeros(n, n, dtype=x.dtype)
        scores = (q[g.dst, h] * k[g.src, h]).sum(-1) * layer.scale
        omega.index_put_((g.dst, g.src), scores.exp(), accumulate=True)  # omega_ij = exp(e_ij)
        mu = omega.sum(1)
        p = omega / mu[:, None]
        out.append((mu * (p @ x - x).pow(2).sum(1)).sum() / n)
    return torch.stack(out)


def test_mu_factor_matches_dense_reference():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 8, dtype=torch.float64)
    g = as_graph(edge_index, x, "add")
    outs = {}
    for norm in ("mu", "n"):
        torch.manual_seed(1)
        layer = GraphSelfAttention(8, 2, nonlocal_energy=True, nonlocal_norm=norm).double()
        outs[norm] = layer(g, x)
    out, alpha = outs["mu"]
    # P_h X V_h per head from the layer's own attention, times the dense factor, then W_o
    v = layer.lin_value(x).view(n, 2, 4)
    agg = torch.zeros(n, 2, 4, dtype=x.dtype).index_add_(0, g.dst, alpha.unsqueeze(-1) * v[g.src])
    expected = layer.lin_out((agg * dense_mu_factor(layer, g, x).view(1, 2, 1)).reshape(n, 8))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-10)
    assert not torch.allclose(out, outs["n"][0])  # a different reading from the default 1/n


def test_mu_factor_with_uniform_attention_is_the_diagnostics_laplacian_energy():
    """Zero query/key weights: e_ij = 0, so omega_ij = 1 and mu_i = deg_i + 1, the energy of §2 that
    zoo.diagnostics.laplacian_energy measures (Tables 2/4/6)."""
    gen = torch.Generator().manual_seed(0)
    n = 30
    a = torch.rand(n, n, generator=gen) < 0.15
    a = (a | a.t()) & ~torch.eye(n, dtype=torch.bool)
    edge_index = a.nonzero().t()
    x = torch.randn(n, 6, dtype=torch.float64, generator=gen)
    g = as_graph(edge_index, x, "add")
    layer = GraphSelfAttention(6, 1, nonlocal_energy=True, nonlocal_norm="mu").double()
    with torch.no_grad():
        layer.lin_query.weight.zero_()
        layer.lin_key.weight.zero_()
        layer.lin_value.weight.copy_(torch.eye(6))
        layer.lin_out.weight.copy_(torch.eye(6))
        out = layer(g, x)[0]
    p = (a.double() + torch.eye(n, dtype=torch.float64))
    p = p / p.sum(1, keepdim=True)
    expected = laplacian_energy(edge_index, x) * (p @ x)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-10)


def test_mu_is_a_named_option_of_san_nonlocal_only():
    model = zoo.build("san_nonlocal", in_dim=3, out_dim=2, hidden_dim=8, nonlocal_norm="mu")
    assert model.layers[0].attention.nonlocal_norm == "mu"
    with pytest.raises(ValueError, match="san_nonlocal"):
        zoo.build("san_post_ln", in_dim=3, out_dim=2, nonlocal_norm="mu")
    with pytest.raises(ValueError, match="mu"):
        zoo.build("san_nonlocal", in_dim=3, out_dim=2, nonlocal_norm="measure")
