"""A torch sparse adjacency (COO or CSR) is a graph input: an edge u -> v per stored adj[u, v]."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_a_sparse_adjacency_gives_the_outputs_of_its_edge_index(layout):
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
    adj = torch.sparse_coo_tensor(edge_index, torch.ones(5), (4, 4))
    adj = adj if layout == "coo" else adj.to_sparse_csr()
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2).eval()
    x = torch.randn(4, 3)
    assert torch.equal(as_graph(adj, x).edge_index, as_graph(edge_index, x).edge_index)
    assert torch.allclose(model(adj, x), model(edge_index, x))


def test_a_weighted_or_non_square_adjacency_is_one_line():
    edge_index = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="values other than 1"):
        as_graph(torch.sparse_coo_tensor(edge_index, torch.tensor([0.5, 2.0]), (2, 2)), torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"must be square \(N, N\), got shape \(2, 3\)"):
        as_graph(torch.sparse_coo_tensor(edge_index, torch.ones(2), (2, 3)), torch.randn(2, 3))
