"""zoo.graph's cache never serves a graph whose edges changed.

Each edit keeps the number of nodes and edges, so only the edges' content tells the graphs
apart; every test compares with the output on a fresh copy of the edited graph.
"""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo import graph as zg
from zoo.graph import as_graph, forget_graph
from tests.conftest import awkward_graph


@pytest.fixture
def setup():
    edge_index, n = awkward_graph()
    x = torch.randn(n, 4)
    model = zoo.build("gat", in_dim=4, out_dim=3, hidden_dim=8, num_layers=2).eval()
    return model, edge_index, x


def _fresh(model, edge_index, x):
    return model(edge_index.clone(), x)


def test_edit_through_data_bypasses_the_version_counter(setup):
    model, edge_index, x = setup
    before = model(edge_index, x)
    version = edge_index._version
    edge_index.data[1, 0] = 6  # edge 0->1 becomes 0->6
    assert edge_index._version == version, "the premise: .data writes do not bump the version"
    after = model(edge_index, x)
    torch.testing.assert_close(after, _fresh(model, edge_index, x))
    assert not torch.allclose(after, before)


def test_edit_through_numpy_view(setup):
    model, edge_index, x = setup
    before = model(edge_index, x)
    edge_index.numpy()[1, 0] = 6
    after = model(edge_index, x)
    torch.testing.assert_close(after, _fresh(model, edge_index, x))
    assert not torch.allclose(after, before)


def test_pyg_data_edited_through_data_and_replaced(setup):
    model, edge_index, x = setup
    data = Data(edge_index=edge_index, num_nodes=x.size(0))
    model(data, x)
    data.edge_index.data[1, 0] = 6
    torch.testing.assert_close(model(data, x), _fresh(model, data.edge_index, x))
    replaced = data.edge_index.clone()
    replaced[1, 1] = 6
    data.edge_index = replaced  # a new tensor with the same shape
    torch.testing.assert_close(model(data, x), _fresh(model, replaced, x))


def test_unchanged_graph_is_still_a_cache_hit(setup):
    _, edge_index, x = setup
    assert as_graph(edge_index, x) is as_graph(edge_index, x)


def test_large_graphs_rely_on_the_fingerprint_and_forget_graph(setup, monkeypatch):
    """Above CONTENT_CHECK_MAX_EDGES the documented contract: hidden edits need forget_graph()."""
    monkeypatch.setattr(zg, "CONTENT_CHECK_MAX_EDGES", 4)
    _, edge_index, x = setup
    g1 = as_graph(edge_index, x)
    edge_index.data[1, 0] = 6
    assert as_graph(edge_index, x) is g1  # not seen: the documented limit
    forget_graph(edge_index)
    g2 = as_graph(edge_index, x)
    assert g2 is not g1 and 6 in g2.dst[g2.src == 0].tolist()
    edge_index[1, 1] = 5  # a normal in-place write bumps the version: seen at any size
    assert as_graph(edge_index, x) is not g2


def test_owned_edges_skip_the_per_call_comparison():
    """The training loop's own copy of a graph is served on its fingerprint alone: no torch.equal
    (a device-to-host read on a GPU) per forward; other graphs are still compared."""
    from tests.trainer.host_sync import HostSyncCounter
    from zoo.graph import owned_edges

    x = torch.randn(4, 2)
    plain = torch.tensor([[0, 1, 2], [1, 2, 3]])
    owned = owned_edges(plain.clone())
    as_graph(plain, x), as_graph(owned, x)  # the entries
    with HostSyncCounter() as counter:
        as_graph(owned, x)
    assert not counter.counts
    with HostSyncCounter() as counter:
        as_graph(plain, x)
    assert counter.counts["aten.equal"] == 1
    before = as_graph(owned, x)
    owned[0, 0] = 3  # an in-place edit still bumps the version: a new normalisation
    assert as_graph(owned, x) is not before


def test_graph_cache_follows_dtype_and_device():
    from zoo.graph import as_graph

    edge_index, n = awkward_graph()
    g = as_graph(edge_index, torch.randn(n, 2))
    assert g.in_degree().dtype == torch.get_default_dtype()
    d64 = g.in_degree(torch.float64)
    assert d64.dtype == torch.float64 and d64.device == edge_index.device
    assert g.in_degree(torch.float32).dtype == torch.float32
    assert g.cached("k", lambda: 1, dtype=torch.float32) != g.cached("k", lambda: 2, dtype=torch.float64)
