"""Our layers equal PyG's convolutions when the weights are copied (one layer, several heads)."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import GATConv, GATv2Conv, GCNConv

import zoo
from zoo.graph import as_graph
from zoo.models.gat import GATLayer
from zoo.models.gatv2 import GATv2Layer
from tests.conftest import awkward_graph

HEADS, IN, C = 3, 6, 4


def data():
    edge_index, n = awkward_graph()
    return edge_index, torch.randn(n, IN)


@pytest.mark.parametrize("concat", [True, False])
def test_gat_equals_pyg_gatconv(concat):
    edge_index, x = data()
    ours = GATLayer(IN, C, HEADS, concat=concat)
    ref = GATConv(IN, C, heads=HEADS, concat=concat, bias=False)
    with torch.no_grad():
        ref.lin.weight.copy_(ours.lin.weight)
        ref.att_src.copy_(ours.att_src.view(1, HEADS, C))
        ref.att_dst.copy_(ours.att_dst.view(1, HEADS, C))
    out, alpha = ours(as_graph(edge_index, x), x)
    expected, (ref_ei, ref_alpha) = ref(x, edge_index, return_attention_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    # Attention is aligned with the edges used: match PyG's per (src, dst) edge (duplicates agree).
    ours_ei = as_graph(edge_index, x).edge_index
    ours_map = {(int(s), int(d)): alpha[e] for e, (s, d) in enumerate(ours_ei.t())}
    for e, (s, d) in enumerate(ref_ei.t()):
        torch.testing.assert_close(ours_map[(int(s), int(d))], ref_alpha[e], atol=1e-5, rtol=1e-5)
    assert ours_ei.size(1) == ref_ei.size(1)


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("concat", [True, False])
def test_gatv2_equals_pyg_gatv2conv(share, concat):
    edge_index, x = data()
    ours = GATv2Layer(IN, C, HEADS, concat=concat, share_weights=share)
    ref = GATv2Conv(IN, C, heads=HEADS, concat=concat, bias=False, share_weights=share)
    with torch.no_grad():
        ref.lin_l.weight.copy_(ours.lin_src.weight)  # PyG: lin_l transforms the source x_j
        if not share:
            ref.lin_r.weight.copy_(ours.lin_dst.weight)
        ref.att.copy_(ours.att.view(1, HEADS, C))
    out, _ = ours(as_graph(edge_index, x), x)
    torch.testing.assert_close(out, ref(x, edge_index), atol=1e-5, rtol=1e-5)


def test_gcn_equals_pyg_gcnconv():
    edge_index, x = data()
    model = zoo.build("gcn", in_dim=IN, out_dim=C, num_layers=1)
    ref = GCNConv(IN, C, bias=False)
    with torch.no_grad():
        ref.lin.weight.copy_(model.layers[0].lin.weight)
    torch.testing.assert_close(model(edge_index, x), ref(x, edge_index), atol=1e-5, rtol=1e-5)


def test_gcn_mean_is_gat_with_zero_attention():
    """Balance paper Remark 2.5: GCN (mean aggregation) = GAT with a = 0."""
    edge_index, x = data()
    gcn = zoo.build("gcn", in_dim=IN, out_dim=3, hidden_dim=8, num_layers=3, normalization="mean")
    for name in ("gat", "gatv2"):
        gat = zoo.build(name, in_dim=IN, out_dim=3, hidden_dim=8, num_layers=3)
        with torch.no_grad():
            for g_layer, a_layer in zip(gcn.layers, gat.layers):
                for p in a_layer.attention_params():
                    p.zero_()
                lin = getattr(a_layer, "lin", None) or a_layer.lin_src
                lin.weight.copy_(g_layer.lin.weight)
        torch.testing.assert_close(gat(edge_index, x), gcn(edge_index, x), atol=1e-6, rtol=1e-6)
