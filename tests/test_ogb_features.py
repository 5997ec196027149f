"""Input/edge encoders, edge-feature attention (vs PyG), graph readouts and activation checkpointing."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.nn.encoders import align_edge_features
from zoo.nn.readout import GraphPool, make_readout


def _graph(n=7, seed=0, loops=True):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (20,), generator=g)
    dst = torch.randint(0, n, (20,), generator=g)
    ei = torch.stack([src, dst])
    if loops:
        ei = torch.cat([ei, torch.tensor([[1, 3], [1, 3]])], 1)  # existing self-loops get replaced
    return ei


def _copy_gatv2_to_pyg(layer, conv):
    with torch.no_grad():
        conv.lin_l.weight.copy_(layer.lin_src.weight)
        conv.lin_r.weight.copy_(layer.lin_src.weight)
        conv.att.copy_(layer.att.unsqueeze(0))
        conv.lin_edge.weight.copy_(layer.lin_edge.weight)


def test_gatv2_edge_term_matches_pyg_gatv2conv():
    from torch_geometric.nn import GATv2Conv

    torch.manual_seed(0)
    ei, n, heads, ch, edim = _graph(), 7, 3, 4, 5
    x = torch.randn(n, 6, dtype=torch.float64)
    ea = torch.randn(ei.size(1), edim, dtype=torch.float64)
    model = zoo.build("gatv2", in_dim=6, out_dim=ch, hidden_dim=heads * ch, num_layers=1, heads=heads,
                      out_heads=heads, edge_encoder="linear", edge_dim=edim).double()
    layer = model.layers[0]
    conv = GATv2Conv(6, ch, heads=heads, edge_dim=heads * ch, bias=False, share_weights=True,
                     concat=False).double()
    _copy_gatv2_to_pyg(layer, conv)
    ours = model(ei, x, edge_attr=ea)
    ref = conv(x, ei, edge_attr=model.edge_encoder(ea))
    assert torch.allclose(ours, ref, atol=1e-5, rtol=0)
    # the edge term matters: without it the outputs differ
    with torch.no_grad():
        layer.lin_edge.weight.zero_()
    assert not torch.allclose(model(ei, x, edge_attr=ea), ref, atol=1e-5)


def test_gatdb_edge_term_matches_pyg_gatconv_at_zero_bias():
    from torch_geometric.nn import GATConv

    torch.manual_seed(1)
    ei, n, heads, ch, edim = _graph(seed=1), 7, 2, 3, 4
    x = torch.randn(n, 5, dtype=torch.float64)
    ea = torch.randn(ei.size(1), edim, dtype=torch.float64)
    model = zoo.build("gatdb", in_dim=5, out_dim=ch, hidden_dim=heads * ch, num_layers=1, heads=heads,
                      out_heads=heads, edge_encoder="linear", edge_dim=edim).double()
    out = model(ei, x, edge_attr=ea)  # ties xi (zero) to this graph
    layer = model.layers[0]
    conv = GATConv(5, ch, heads=heads, edge_dim=heads * ch, bias=False, concat=False).double()
    with torch.no_grad():
        conv.lin.weight.copy_(layer.lin.weight)
        conv.att_src.copy_(layer.att_src.unsqueeze(0))
        conv.att_dst.copy_(layer.att_dst.unsqueeze(0))
        conv.att_edge.copy_(layer.att_edge.unsqueeze(0))
        conv.lin_edge.weight.copy_(layer.lin_edge.weight)
    ref = conv(x, ei, edge_attr=model.edge_encoder(ea))
    assert torch.allclose(out, ref, atol=1e-5, rtol=0)


def test_align_edge_features_follows_the_self_loop_policy():
    ei = torch.tensor([[0, 1, 2, 2, 1], [1, 1, 1, 0, 2]])
    attr = torch.tensor([[1.0], [9.0], [3.0], [5.0], [7.0]])
    for policy in ("add", "keep", "remove"):
        g = as_graph(ei, torch.zeros(3, 1), policy)
        out = align_edge_features(ei, 3, policy, attr)
        assert out.size(0) == g.num_edges
    g = as_graph(ei, torch.zeros(3, 1), "add")
    out = align_edge_features(ei, 3, "add", attr)
    lookup = {(int(s), int(d)): float(v) for (s, d), v in zip(g.edge_index.t().tolist(), out.view(-1))}
    assert lookup[(0, 1)] == 1.0 and lookup[(2, 0)] == 5.0 and lookup[(1, 2)] == 7.0
    assert lookup[(1, 1)] == 2.0  # replaced loop: mean of node 1's other incoming edges (1, 3)
    assert lookup[(0, 0)] == 5.0 and lookup[(2, 2)] == 7.0


def test_edge_encoder_refused_where_the_layer_has_no_edge_term():
    with pytest.raises(ValueError, match="no edge-feature term.*gatv2 or gatdb"):
        zoo.build("gcn", in_dim=9, out_dim=2, edge_encoder="bond")
    with pytest.raises(ValueError, match="no edge-feature term"):
        zoo.build("gat", in_dim=9, out_dim=2, edge_encoder="bond")
    model = zoo.build("gatv2", in_dim=9, out_dim=2, hidden_dim=8, edge_encoder="bond", input_encoder="atom")
    with pytest.raises(ValueError, match="needs edge features"):
        model(torch.tensor([[0], [1]]), torch.zeros(2, 9, dtype=torch.long))


def test_encoder_names_are_normalised_and_typos_listed():
    model = zoo.build("gatv2", in_dim=9, out_dim=2, hidden_dim=8, input_encoder="Atom-Encoder")
    assert model.layers[0].in_dim == 8  # layer 1 reads the encoder's output width
    with pytest.raises(ValueError, match="Did you mean 'atom'"):
        zoo.build("gatv2", in_dim=9, out_dim=2, input_encoder="atm")
    model = zoo.build("gatv2", in_dim=5, out_dim=2, input_encoder="atom")
    with pytest.raises(ValueError, match="9 atom feature columns"):
        model(torch.tensor([[0], [1]]), torch.zeros(2, 5, dtype=torch.long))


def test_atom_and_bond_encoders_on_molecule_codes():
    from ogb.graphproppred.mol_encoder import AtomEncoder

    torch.manual_seed(0)
    x = torch.randint(0, 2, (5, 9))
    ei = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    ea = torch.randint(0, 2, (4, 3))
    model = zoo.build("gatv2", in_dim=9, out_dim=3, hidden_dim=8, heads=2, num_layers=2,
                      input_encoder="atom", edge_encoder="bond")
    assert isinstance(model.input_encoder.encoder, AtomEncoder)
    out = model(ei, x, edge_attr=ea)
    assert out.shape == (5, 3)
    # float codes (the runner casts features to its dtype) give the same output
    assert torch.allclose(model(ei, x.float(), edge_attr=ea), out)
    # edge features change the output
    assert not torch.allclose(model(ei, x, edge_attr=torch.zeros_like(ea)), out)


@pytest.mark.parametrize("name", ["mean", "sum", "attention"])
def test_readouts(name):
    torch.manual_seed(0)
    h = torch.randn(6, 4, dtype=torch.float64)
    batch = torch.tensor([0, 0, 1, 1, 1, 2])
    r = make_readout(name, 4).double()
    out = r(h, batch, 3)
    if name == "sum":
        ref = torch.stack([h[:2].sum(0), h[2:5].sum(0), h[5:].sum(0)])
    elif name == "mean":
        ref = torch.stack([h[:2].mean(0), h[2:5].mean(0), h[5:].mean(0)])
    else:
        from torch_geometric.nn.aggr import AttentionalAggregation

        ref = AttentionalAggregation(r.gate)(h, batch, dim_size=3)
    assert torch.allclose(out, ref, atol=1e-12)


def test_readout_names():
    assert type(make_readout("Global-Attention", 4)).__name__ == "AttentionReadout"
    with pytest.raises(ValueError, match="Did you mean 'mean'"):
        make_readout("meen", 4)


def test_graph_pool_moved_but_importable_from_train():
    from zoo.bench.train import GraphPool as Old

    assert Old is GraphPool


@pytest.mark.parametrize("name", ["gatv2", "gcn", "gat"])
def test_checkpoint_does_not_change_numbers(name):
    torch.manual_seed(0)
    ei, x = _graph(), torch.randn(7, 5, dtype=torch.float64)
    kw = dict(in_dim=5, out_dim=3, hidden_dim=8, num_layers=4, dropout=0.3, residual="linear")
    grads = []
    for ckpt in (False, True):
        torch.manual_seed(1)
        model = zoo.build(name, checkpoint=ckpt, **kw).double().train()
        torch.manual_seed(2)  # same dropout masks
        out = model(ei, x)
        loss = (out ** 2).sum()
        loss.backward()
        grads.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (o0, g0), (o1, g1) = grads
    assert torch.equal(o0, o1)
    assert len(g0) == len(g1) and all(torch.allclose(a, b, rtol=1e-12, atol=1e-14) for a, b in zip(g0, g1))


def test_checkpoint_keeps_fewer_tensors():
    """With checkpoint=True autograd keeps only the layer inputs (hooks count saved bytes)."""
    torch.manual_seed(0)
    ei, x = _graph(n=50, seed=3), torch.randn(50, 16)
    ei = torch.cat([ei, torch.randint(0, 50, (2, 400))], 1)

    def saved_bytes(model):
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(ei, x).sum()
        return total[0]

    kw = dict(in_dim=16, out_dim=4, hidden_dim=32, heads=4, num_layers=8)
    torch.manual_seed(1)
    plain = saved_bytes(zoo.build("gatv2", **kw))
    torch.manual_seed(1)
    ckpt = saved_bytes(zoo.build("gatv2", checkpoint=True, **kw))
    assert ckpt < plain / 3
