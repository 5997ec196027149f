"""GCN in float64 equals PyG's GCNConv (the balance paper's Table 7 GCN runs in float64)."""
from __future__ import annotations

import torch

import zoo
from tests.conftest import awkward_graph


def test_gcn_float64_matches_pyg_gcnconv():
    from torch_geometric.nn import GCNConv

    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    model = zoo.build("gcn", in_dim=6, out_dim=4, num_layers=1).double()
    ref = GCNConv(6, 4, bias=False).double()
    with torch.no_grad():
        ref.lin.weight.copy_(model.layers[0].lin.weight)
    # A float32 forward on the same graph first: its cached coefficients must not be reused.
    model.float()(edge_index, x.float())
    model.double()
    torch.testing.assert_close(model(edge_index, x), ref(x, edge_index), atol=1e-12, rtol=1e-12)
