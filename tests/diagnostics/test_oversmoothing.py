"""Oversmoothing diagnostics: energies against a dense reference, traces, similarity, pruning, plots."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.diagnostics import (cosine_similarity, dirichlet_energy, energy_trace, laplacian_energy,
                             layer_pruning_sensitivity, layer_representations, relative_energy,
                             similarity_matrix)
from tests.conftest import awkward_graph


def dense_reference(edge_index, x):
    """Energies from the dense adjacency of the simple undirected graph (omega = 1, mu = deg + 1)."""
    n = x.size(0)
    a = torch.zeros(n, n, dtype=torch.float64)
    a[edge_index[0], edge_index[1]] = 1
    a = ((a + a.t()) > 0).double()
    a.fill_diagonal_(0)
    mu = a.sum(1) + 1
    lap = (a - torch.diag(a.sum(1))) / mu[:, None]  # Delta_mu as a matrix
    x = x.double()
    dirichlet = sum(a[i, j] * (x[j] - x[i]).pow(2).sum() for i in range(n) for j in range(n)) / n
    laplacian = (mu * (lap @ x).pow(2).sum(1)).sum() / n
    return dirichlet, laplacian


def test_energies_match_dense_reference_on_awkward_graph():
    edge_index, n = awkward_graph()  # self-loop, duplicate edge, directed edge, isolated node
    x = torch.randn(n, 5, dtype=torch.float64)
    d_ref, l_ref = dense_reference(edge_index, x)
    torch.testing.assert_close(dirichlet_energy(edge_index, x), d_ref)
    torch.testing.assert_close(laplacian_energy(edge_index, x), l_ref)


def test_energies_zero_for_constant_and_positive_otherwise():
    edge_index, n = awkward_graph()
    const = torch.ones(n, 4) * 3.7
    assert dirichlet_energy(edge_index, const) == 0 and laplacian_energy(edge_index, const) == 0
    x = torch.randn(n, 4)
    assert dirichlet_energy(edge_index, x) > 0 and laplacian_energy(edge_index, x) > 0


def test_relative_energy():
    torch.testing.assert_close(relative_energy([1.0, 2.0, 1.0]), torch.tensor([1.0, -0.5], dtype=torch.float64))
    with pytest.raises(ValueError):
        relative_energy([1.0])


@pytest.mark.parametrize("name", ["gat", "gcn", "san_pre_ln", "universal_transformer"])
def test_energy_trace_uses_hooks_on_any_model(name):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6)
    kw = {"pe_dim": 0} if "transformer" in name else {}
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=4, **kw).eval()
    reps = layer_representations(model, edge_index, x)
    assert len(reps) == 4
    trace = energy_trace(model, edge_index, x)
    assert trace.shape == (4,)
    torch.testing.assert_close(trace[1], laplacian_energy(edge_index, reps[1]).double())
    assert energy_trace(model, edge_index, x, "dirichlet", include_input=True).shape == (5,)
    assert all(len(t._forward_hooks) == 0 for t in model.taps)  # hooks removed
    with pytest.raises(ValueError, match="laplacian"):
        energy_trace(model, edge_index, x, energy="laplace")


def test_similarity_matrix():
    a = torch.randn(10, 4)
    torch.testing.assert_close(cosine_similarity(a, a), torch.tensor(1.0))
    torch.testing.assert_close(cosine_similarity(a, -a), torch.tensor(-1.0))
    edge_index, n = awkward_graph()
    model = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, num_layers=4).eval()
    s = similarity_matrix(model, edge_index, torch.randn(n, 6))
    assert s.shape == (4, 4)
    torch.testing.assert_close(torch.diagonal(s)[:3], torch.ones(3, dtype=torch.float64))
    assert torch.isnan(s[0, 3]) and torch.equal(s[:3, :3], s[:3, :3].t())


def test_layer_pruning_sensitivity_skips_one_layer_at_a_time():
    edge_index, n = awkward_graph()
    x, y = torch.randn(n, 6), torch.randint(0, 3, (n,))
    model = zoo.build("san_pre_ln", in_dim=6, out_dim=3, hidden_dim=8, num_layers=4).eval()
    base = model(edge_index, x)
    result = layer_pruning_sensitivity(model, edge_index, x, y)
    assert set(result["pruned"]) == {0, 1, 2, 3}
    assert result["baseline"] == float((base.argmax(-1) == y).double().mean())
    assert model.skipped_layers == set()
    model.skipped_layers = {2}
    pruned_out = model(edge_index, x)
    model.skipped_layers = set()
    assert not torch.allclose(pruned_out, base)
    assert result["pruned"][2] == float((pruned_out.argmax(-1) == y).double().mean())
    # gat's first/last layers change the width and are left out of the default set
    gat = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, num_layers=4)
    assert set(layer_pruning_sensitivity(gat, edge_index, x, y)["pruned"]) == {1, 2}


def test_plots(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from zoo.diagnostics.plots_energy import plot_energy_trace, plot_similarity_matrix

    ax = plot_energy_trace({"a": [1.0, 0.1, 0.01], "b": torch.tensor([1.0, 0.5, 0.3])})
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and len(ax.get_lines()) == 2
    ax = plot_similarity_matrix(torch.eye(3), title="sim")
    ax.figure.savefig(tmp_path / "sim.png")
    assert (tmp_path / "sim.png").stat().st_size > 0
