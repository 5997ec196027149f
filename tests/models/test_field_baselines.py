"""The field's baselines against their equations: the FAF table + MLP, Luo et al.'s GAT* / GCN* block
(the authors' MPNN recomputed by hand), and the PyG graph transformers' logits."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.models.faf import reduce_step
from zoo.models.gcn import propagation_coefficients
from zoo.ops.segment import segment_sum

EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 5, 0], [1, 0, 2, 1, 3, 2, 4, 3, 4, 3]])
N = 6


def dense_adjacency() -> torch.Tensor:
    """The neighbourhoods of the ``add`` policy: existing self-loops dropped, one per node added."""
    a = torch.zeros(N, N, dtype=torch.float64)
    a[EDGES[1], EDGES[0]] = 1  # row v: the sources u of edges u -> v
    a.fill_diagonal_(1)
    return a


def test_fixed_aggregation_reducers_follow_their_definitions():
    x = torch.randn(N, 3, dtype=torch.float64)
    g = as_graph(EDGES, x, "add")
    a = dense_adjacency()
    deg_in = a.sum(1, keepdim=True)
    torch.testing.assert_close(reduce_step(g, x, "sum"), a @ x)
    torch.testing.assert_close(reduce_step(g, x, "mean"), a @ x / deg_in)
    mean = a @ x / deg_in
    torch.testing.assert_close(reduce_step(g, x, "std"), ((a @ (x * x)) / deg_in - mean ** 2).clamp_min(0).sqrt())
    deg_out = a.sum(0)  # the code's degree: counted at the source
    gcn = a / (deg_out[None, :] * deg_out[:, None]).sqrt()
    torch.testing.assert_close(reduce_step(g, x, "gcn"), gcn @ x)
    for v in range(N):
        nbrs = a[v].nonzero().flatten()
        torch.testing.assert_close(reduce_step(g, x, "max")[v], x[nbrs].max(0).values)
        torch.testing.assert_close(reduce_step(g, x, "min")[v], x[nbrs].min(0).values)


def test_faf_mlp_is_an_mlp_on_the_concatenated_hops():
    torch.manual_seed(0)
    model = zoo.build("faf_mlp", in_dim=3, out_dim=2, hidden_dim=5, num_layers=2, hops=2,
                      reducers=["mean", "max"]).double().eval()
    x = torch.randn(N, 3, dtype=torch.float64)
    g = as_graph(EDGES, x, "add")
    m1 = reduce_step(g, x, "mean")
    mx1 = reduce_step(g, x, "max")
    z = torch.cat([x, m1, reduce_step(g, m1, "mean"), mx1, reduce_step(g, mx1, "max")], 1)
    l1, l2 = model.mlp.linears
    torch.testing.assert_close(model(EDGES, x), l2(torch.relu(l1(z))))
    assert model.mlp.linears[0].in_features == 3 * 5
    with pytest.raises(ValueError, match="reducer"):
        zoo.build("faf_mlp", in_dim=3, out_dim=2, reducers=["median"])
    assert zoo.inits.init_incompatibility(model, "bal_o")


def test_luo_block_is_the_authors_mpnn():
    """GCN*: x <- dropout(relu(norm(conv(x) + lin(x)))) for every layer, then a linear classifier."""
    torch.manual_seed(0)
    model = zoo.build("gcn.luo2024_minesweeper", in_dim=4, out_dim=2, hidden_dim=8, num_layers=3).double().eval()
    assert model.residual == "affine" and model.skips[0].weight.abs().sum() > 0  # default init kept
    x = torch.randn(N, 4, dtype=torch.float64)
    g = as_graph(EDGES, x, "add")
    coef = propagation_coefficients(g, "symmetric", x.dtype)
    h = x
    for layer, skip, norm in zip(model.layers, model.skips, model.norms):
        conv = segment_sum(coef * (h @ layer.lin.weight.t())[g.src], g.dst, N) + layer.bias
        h = torch.relu(norm(conv + skip(h)))
    torch.testing.assert_close(model(EDGES, x), model.classifier(h))


def test_luo_presets_drop_after_the_activation_not_the_raw_input():
    torch.manual_seed(0)
    model = zoo.build("gat.luo2024_cora", in_dim=4, out_dim=2, hidden_dim=8).double().train()
    assert model.dropout_position == "output" and model.classifier_input == "activated"
    seen = []
    model.layers[0].register_forward_pre_hook(lambda m, args: seen.append(args[1]))
    x = torch.randn(N, 4, dtype=torch.float64)
    model(EDGES, x)
    torch.testing.assert_close(seen[0], x)  # the first layer reads the raw features, not dropped


@pytest.mark.parametrize("name", ["polynormer", "sgformer"])
def test_pyg_transformers_give_logits_and_a_binary_logit(name):
    torch.manual_seed(0)
    x = torch.randn(N, 4)
    multi = zoo.build(name, in_dim=4, out_dim=3, hidden_dim=8, num_layers=2).eval()
    out = multi(EDGES, x)
    torch.testing.assert_close(out.logsumexp(-1), torch.zeros(N), atol=1e-5, rtol=0)  # PyG's log-probabilities
    torch.manual_seed(0)
    binary = zoo.build(name, in_dim=4, out_dim=1, hidden_dim=8, num_layers=2).eval()
    logit = binary(EDGES, x)
    logp = binary.pyg(x, as_graph(EDGES, x, "add").edge_index, torch.zeros(N, dtype=torch.long))
    torch.testing.assert_close(logit[:, 0], logp[:, 1] - logp[:, 0])
    assert zoo.inits.init_incompatibility(binary, "bal_o") and not binary.vmap_safe
