"""Graph input: edge_index, PyG Data and real DGL graphs; validation and caching."""
from __future__ import annotations

import sys

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.graph import as_graph
from tests.conftest import awkward_graph
from tests.dgl_support import real_dgl


@pytest.mark.dgl
@pytest.mark.parametrize("name", zoo.list_models())
def test_edge_index_data_and_dgl_give_the_same_output(name):
    dgl = real_dgl()
    edge_index, n = awkward_graph()
    x = torch.randn(n, 6)
    model = zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=2).eval()
    expected = model(edge_index, x)
    graph = dgl.graph((edge_index[0], edge_index[1]), num_nodes=n)
    if model.graph_tied:  # same edges in the same order: the tied model accepts the DGL graph too
        torch.testing.assert_close(model(graph, x), expected)
        return
    torch.testing.assert_close(model(Data(edge_index=edge_index, num_nodes=n), x), expected)
    torch.testing.assert_close(model(graph, x), expected)
    assert "dgl" in type(graph).__module__


def test_dgl_is_not_imported_for_tensors():
    code = (
        "import sys, torch, zoo; m = zoo.build('gat', in_dim=2, out_dim=2);"
        "m(torch.tensor([[0],[1]]), torch.randn(2, 2)); print('dgl' in sys.modules)"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_same_edge_index_with_more_nodes_is_a_new_graph():
    """The node count of an edge_index graph comes from x: it must be part of the cache key."""
    edge_index = torch.tensor([[0, 1], [1, 0]])
    model = zoo.build("gat", in_dim=2, out_dim=2)
    assert model(edge_index, torch.randn(2, 2)).shape == (2, 2)
    out = model(edge_index, torch.randn(4, 2))  # two extra isolated nodes
    assert out.shape == (4, 2) and torch.isfinite(out).all()
    assert as_graph(edge_index, torch.randn(4, 2)).num_nodes == 4


def test_self_loop_policies():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 2)
    loops = lambda g: int((g.src == g.dst).sum())
    assert loops(as_graph(edge_index, x, "add")) == n  # existing self-loop replaced, one per node
    assert loops(as_graph(edge_index, x, "keep")) == 1
    assert loops(as_graph(edge_index, x, "remove")) == 0
    g = as_graph(edge_index, x, "add")
    assert torch.all(g.dst[1:] >= g.dst[:-1]), "edges must be sorted by destination"


def test_validation_is_cached_and_invalidated_by_in_place_edits():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 2)
    g1 = as_graph(edge_index, x)
    assert as_graph(edge_index, x) is g1
    data = Data(edge_index=edge_index, num_nodes=n)
    assert as_graph(data, x) is as_graph(data, x)
    edge_index[1, 0] = 6  # in-place edit: the version counter changes, the cache must not be used
    g2 = as_graph(edge_index, x)
    assert g2 is not g1 and 6 in g2.dst[g2.src == 0].tolist()


@pytest.mark.parametrize(
    "graph, x, message",
    [
        (torch.tensor([[0, 1], [1, 5]]), torch.randn(3, 2), "refers to node 5 but the graph has 3 nodes"),
        (torch.tensor([[0, -1], [1, 2]]), torch.randn(3, 2), "refers to node -1"),
        (torch.tensor([[0, 1, 2]]), torch.randn(3, 2), r"shape \(2, E\)"),
        (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.randn(3, 2), "integer node indices"),
        (Data(edge_index=torch.tensor([[0], [1]]), num_nodes=4), torch.randn(3, 2), "3 rows but the graph has 4 nodes"),
    ],
)
def test_invalid_graphs_raise_clear_errors(graph, x, message):
    model = zoo.build("gat", in_dim=2, out_dim=2)
    with pytest.raises((ValueError, TypeError), match=message):
        model(graph, x)


def test_unsupported_graph_type_and_policy():
    with pytest.raises(TypeError, match="cannot read a graph from list"):
        as_graph([[0, 1], [1, 0]], torch.randn(2, 2))
    with pytest.raises(ValueError, match="unknown self_loops policy 'sometimes'"):
        as_graph(torch.tensor([[0], [1]]), torch.randn(2, 2), "sometimes")


def test_self_loops_checked_and_normalised_at_build():
    assert zoo.build("gat", in_dim=2, out_dim=2, self_loops="Keep").self_loops == "keep"
    with pytest.raises(ValueError, match="unknown self_loops policy 'sometimes'"):
        zoo.build("gat", in_dim=2, out_dim=2, self_loops="sometimes")
