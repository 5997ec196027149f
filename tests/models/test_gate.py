"""GATE: the layer equals a dense reference of its equation, the self-loop score can switch
aggregation off (alpha_vv -> 1, a perceptron), LL-orthogonal starts uniform, and the family
trains in the stacked trainer."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.diagnostics import attention_distribution
from zoo.graph import as_graph
from zoo.models.gate import GATELayer

EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 5, 0, 4], [1, 0, 2, 1, 3, 2, 4, 3, 4, 3, 0]])
N = 6


def dense_reference(layer: GATELayer, edge_index: torch.Tensor, x: torch.Tensor):
    """The equation node by node: softmax over N(v) + {v}, a_s on the self-loop, a_t elsewhere."""
    H, C = layer.heads, layer.channels
    u_w = layer.lin.weight if layer.lin_src is None else layer.lin_src.weight
    v_w = layer.lin.weight if layer.lin_dst is None else layer.lin_dst.weight
    u_h, v_h = (x @ u_w.T).view(-1, H, C), (x @ v_w.T).view(-1, H, C)
    w_h = (x @ layer.lin.weight.T).view(-1, H, C)
    out = torch.zeros(x.size(0), H, C, dtype=x.dtype)
    for v in range(x.size(0)):
        nbrs = sorted({int(u) for u, t in edge_index.t().tolist() if t == v and u != v}) + [v]
        e = torch.stack([((layer.att_self if u == v else layer.att_nbr)
                          * torch.nn.functional.leaky_relu(u_h[u] + v_h[v], layer.negative_slope)).sum(-1)
                         for u in nbrs])  # (deg + 1, H)
        alpha = torch.softmax(e, 0)
        out[v] = (alpha.unsqueeze(-1) * w_h[nbrs]).sum(0)
    return out.reshape(x.size(0), -1) if layer.concat else out.mean(1)


@pytest.mark.parametrize("heads, concat, slope, shared", [(1, True, 0.0, False), (3, True, 0.0, False),
                                                         (2, False, 0.2, False), (2, True, 0.0, True)])
def test_layer_matches_dense_reference(heads, concat, slope, shared):
    torch.manual_seed(0)
    layer = GATELayer(5, 4, heads, concat, negative_slope=slope, share_weights=shared).double()
    with torch.no_grad():
        for p in (layer.att_nbr, layer.att_self):
            p.normal_()
    x = torch.randn(N, 5, dtype=torch.float64)
    g = as_graph(EDGES, x, "add")
    out, alpha = layer(g, x)
    torch.testing.assert_close(out, dense_reference(layer, EDGES, x), rtol=1e-10, atol=1e-10)
    assert alpha.shape == (g.num_edges, heads)


def test_self_score_switches_aggregation_off():
    """A large a_s on a positive self score puts alpha_vv -> 1: the layer is the perceptron W h_v."""
    torch.manual_seed(0)
    layer = GATELayer(4, 4).double()
    x = torch.rand(N, 4, dtype=torch.float64) + 0.5
    with torch.no_grad():
        layer.lin_src.weight.copy_(torch.eye(4))
        layer.lin_dst.weight.copy_(torch.eye(4))
        layer.att_nbr.zero_()
        layer.att_self.fill_(50.0)
    out, _ = layer(as_graph(EDGES, x, "add"), x)
    torch.testing.assert_close(out, x @ layer.lin.weight.T, rtol=1e-12, atol=1e-12)
    model = zoo.build("gate", in_dim=4, out_dim=4, num_layers=1, hidden_dim=4).double()
    model.layers[0].load_state_dict(layer.state_dict())
    assert attention_distribution(model, EDGES, x)["self_attention"][0] > 1 - 1e-12
    with torch.no_grad():  # a_s = a_t: no preference for the self-loop
        model.layers[0].att_self.zero_()
    assert attention_distribution(model, EDGES, x)["self_attention"][0] < 0.5


def test_ll_orthogonal_starts_with_uniform_attention():
    """The authors' LLortho: zero attention, so alpha_vv = 1 / (deg + 1) for every node."""
    model = zoo.build("gate", in_dim=5, out_dim=3, num_layers=3, hidden_dim=8, init="ll_orthogonal").double()
    for layer in model.layers:
        assert not layer.att_nbr.detach().any() and not layer.att_self.detach().any()
    x = torch.randn(N, 5, dtype=torch.float64)
    g = as_graph(EDGES, x, "add")
    deg = torch.bincount(g.dst, minlength=N).double()
    dist = attention_distribution(model, EDGES, x)
    assert dist["self_attention"] == pytest.approx([float((1 / deg).mean())] * 3, rel=1e-12)
    assert dist["entropy"] == pytest.approx([1.0] * 3, rel=1e-12)


def test_score_norms_are_refused():
    with pytest.raises(ValueError, match="no rule for GATE's score"):
        zoo.build("gate", in_dim=5, out_dim=3, norm="lipschitz")


def test_trains_stacked_with_gat(mirror):
    """The trainer's vmapped replicas (seeds x inits) take GATE like any family."""
    history = zoo.fit("gate", "cornell", num_layers=3, hidden_dim=8, epochs=3, seeds=[0, 1],
                      inits=["ll_orthogonal", "bal_o"], dtype="float64", optimizer="adam", lr=0.005)
    assert history.size == 4 and all(f["train"] is not None for f in history.final)


@pytest.mark.parametrize("shared", [False, True])
def test_fused_kernels_give_the_plain_numbers(shared):
    """The neighbour scores and the aggregation take the fused kernels (forced on at every size)
    and equal the plain ops, outputs and gradients, in float64."""
    from zoo.ops import fused

    x = torch.randn(N, 5, dtype=torch.float64)
    results = []
    for on in (False, True):
        torch.manual_seed(0)
        model = zoo.build("gate", in_dim=5, out_dim=3, num_layers=3, hidden_dim=8, heads=2,
                          share_weights=shared).double()
        with torch.no_grad():
            for layer in model.layers:
                layer.att_nbr.normal_()
                layer.att_self.normal_()
        with fused(on, min_elements=0):
            out = model(EDGES, x)
            out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (o0, g0), (o1, g1) = results
    torch.testing.assert_close(o1, o0, rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
