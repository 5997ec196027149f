"""BatchNorm and GraphNormv2 feature norms against their equations, and their place in DeepGNN."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.norms import resolve_norm
from zoo.norms.graphnorm_v2 import GraphNormV2, propagation_eigenbasis


def ring(n: int = 12) -> torch.Tensor:
    i = torch.arange(n)
    return torch.cat([torch.stack([i, (i + 1) % n]), torch.stack([(i + 1) % n, i])], 1)


def star_and_path() -> torch.Tensor:
    e = [(0, 1), (0, 2), (0, 3), (3, 4), (4, 5), (5, 6), (2, 6)]
    t = torch.tensor(e).t()
    return torch.cat([t, t.flip(0)], 1)


def test_batchnorm_plugin_standardises_each_column_over_the_nodes():
    norm = resolve_norm("batchnorm").make(4).double().train()
    x = torch.randn(30, 4, dtype=torch.float64) * 3 + 1
    expected = (x - x.mean(0)) / (x.var(0, unbiased=False) + 1e-5).sqrt()
    torch.testing.assert_close(norm(x), expected)
    with pytest.raises(ValueError, match="momentum"):
        resolve_norm("batchnorm", momentum=2.0)


def test_propagation_eigenbasis_holds_eigenvectors_of_gcn_operator_and_the_rest_of_one():
    edges = star_and_path()
    g = as_graph(edges, torch.zeros(7, 1), "add")
    v = propagation_eigenbasis(g, 3)
    assert v.shape == (7, 4)
    torch.testing.assert_close(v.t() @ v, torch.eye(4, dtype=torch.float64), atol=1e-10, rtol=0)
    adj = torch.zeros(7, 7, dtype=torch.float64)
    adj[edges[0], edges[1]] = 1
    adj += torch.eye(7, dtype=torch.float64)
    d = adj.sum(1).rsqrt()
    p = d[:, None] * adj * d[None, :]
    for i in range(3):
        pv = p @ v[:, i]
        lam = pv @ v[:, i]
        torch.testing.assert_close(pv, lam * v[:, i], atol=1e-10, rtol=0)
    ones = torch.ones(7, dtype=torch.float64)
    rest = ones - v[:, :3] @ (v[:, :3].t() @ ones)
    torch.testing.assert_close(v[:, 3], rest / rest.norm(), atol=1e-10, rtol=0)


def test_graphnorm_v2_follows_its_equation_and_is_graphnorm_at_k0():
    torch.manual_seed(0)
    edges = star_and_path()
    g = as_graph(edges, torch.zeros(7, 1), "add")
    x = torch.randn(7, 5, dtype=torch.float64)
    norm = GraphNormV2(5, k=2).double()
    with torch.no_grad():
        norm.shift.uniform_(0, 2)
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    v = propagation_eigenbasis(g, 2)
    xc = x - v @ (norm.shift * (v.t() @ x))
    expected = norm.weight * xc / (xc.pow(2).mean(0) + 1e-5).sqrt() + norm.bias
    torch.testing.assert_close(norm(x, g), expected)
    # k = 0: V = 1/sqrt(N), the centering is GraphNorm's alpha * mean (Cai et al. 2021)
    plain = GraphNormV2(5, k=0).double()
    with torch.no_grad():
        plain.shift.fill_(0.7)
    xc0 = x - 0.7 * x.mean(0)
    torch.testing.assert_close(plain(x, g), xc0 / (xc0.pow(2).mean(0) + 1e-5).sqrt())


def test_deep_gnn_hands_the_graph_to_graphnorm_v2_and_counts_norms_with_an_activated_classifier():
    torch.manual_seed(0)
    x = torch.randn(12, 4)
    model = zoo.build("gcn", in_dim=4, out_dim=2, hidden_dim=8, num_layers=3, residual="linear",
                      norm="graphnorm_v2", norm_kwargs={"k": 2})
    assert len(model.norms) == 2 and torch.isfinite(model(ring(), x)).all()
    luo = zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=8, num_layers=3, residual="affine", norm="batchnorm",
                    classifier="linear", classifier_input="activated", dropout=0.5, dropout_position="output")
    assert len(luo.norms) == 3
    with pytest.raises(ValueError, match="classifier_input"):
        zoo.build("gat", in_dim=4, out_dim=2, classifier_input="activated")
    with pytest.raises(ValueError, match="dropout_position"):
        zoo.build("gat", in_dim=4, out_dim=2, dropout_position="middle")


def test_a_norm_that_reads_the_graph_is_refused_by_transformer_blocks():
    """GraphNormv2 declares FeatureNorm's reads_graph; transformer blocks normalise without a graph."""
    assert resolve_norm("graphnorm_v2").reads_graph and not getattr(resolve_norm("batchnorm"), "reads_graph", False)
    with pytest.raises(ValueError, match="norm 'graphnorm_v2' reads the graph"):
        zoo.build("graph_transformer", in_dim=4, out_dim=2, hidden_dim=8, pe_dim=2, norm="graphnorm_v2")


def test_an_activated_classifier_input_that_changes_nothing_is_refused():
    with pytest.raises(ValueError, match="would change nothing"):
        zoo.build("gat", in_dim=4, out_dim=2, activation="identity", classifier="linear",
                  classifier_input="activated")
    zoo.build("gat", in_dim=4, out_dim=2, activation="identity", classifier="linear", classifier_input="activated",
              norm="batchnorm")
