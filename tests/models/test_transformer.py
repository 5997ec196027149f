"""Graph transformers and UniMP: parameter sharing, positional encodings, attention masking."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.graph import as_graph
from zoo.models.transformer import laplacian_eigenvectors


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("pe_dim", [0, 4])
def test_universal_transformer_has_one_layers_parameters(pe_dim):
    kw = dict(in_dim=6, out_dim=3, hidden_dim=16, heads=2, pe_dim=pe_dim)
    one = zoo.build("graph_transformer", num_layers=1, **kw)
    deep_universal = zoo.build("universal_transformer", num_layers=6, **kw)
    deep_vanilla = zoo.build("graph_transformer", num_layers=6, **kw)
    assert n_params(deep_universal) == n_params(one)
    assert n_params(deep_vanilla) > n_params(one)
    assert len(deep_universal.layers) == 1 and deep_universal.num_layers == 6


def test_universal_transformer_applies_the_shared_block_num_layers_times():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    x = torch.randn(3, 6)
    model = zoo.build("universal_transformer", in_dim=6, out_dim=3, hidden_dim=8, num_layers=4, pe_dim=0).eval()
    out, records = model(ei, x, return_attention=True)
    assert len(records) == 4
    g = as_graph(ei, x, "add")
    h = model.lin_in(x)
    for _ in range(4):
        h, _ = model.layers[0](g, h)
    torch.testing.assert_close(out, model.lin_out(h))


def test_attention_is_masked_to_neighbourhood_plus_self():
    ei = torch.tensor([[0, 1], [1, 2]])  # 0 -> 1 -> 2
    x = torch.randn(3, 6)
    model = zoo.build("graph_transformer", in_dim=6, out_dim=3, hidden_dim=8, num_layers=1, pe_dim=0).eval()
    _, records = model(ei, x, return_attention=True)
    pairs = {tuple(e) for e in records[0].edge_index.t().tolist()}
    assert pairs == {(0, 1), (1, 2), (0, 0), (1, 1), (2, 2)}
    # node 0 only sees itself: changing node 2 cannot change node 0's output
    x2 = x.clone()
    x2[2] += 10
    torch.testing.assert_close(model(ei, x2)[0], model(ei, x)[0])


def path_graph(n: int) -> torch.Tensor:
    a = torch.arange(n - 1)
    return torch.cat([torch.stack([a, a + 1]), torch.stack([a + 1, a])], dim=1)


def test_laplacian_eigenvectors_are_the_smallest_nontrivial_ones():
    n, k = 12, 3
    ei = path_graph(n)
    g = as_graph(ei, torch.zeros(n, 1), "add")
    pe = laplacian_eigenvectors(g, k)
    assert pe.shape == (n, k)
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[ei[0], ei[1]] = 1
    d = adj.sum(1).rsqrt()
    lap = torch.eye(n, dtype=torch.float64) - d[:, None] * adj * d[None, :]
    vals = torch.linalg.eigvalsh(lap)
    rayleigh = ((pe.double() * (lap @ pe.double())).sum(0))
    torch.testing.assert_close(rayleigh, vals[1:k + 1], atol=1e-6, rtol=1e-6)
    assert laplacian_eigenvectors(g, k) is pe  # cached on the graph


def test_laplacian_eigenvectors_padded_on_tiny_graphs():
    g = as_graph(torch.tensor([[0], [1]]), torch.zeros(2, 1), "add")
    pe = laplacian_eigenvectors(g, 4)
    assert pe.shape == (2, 4) and (pe[:, 1:] == 0).all() and pe[:, 0].abs().sum() > 0


def test_positional_encodings_change_the_output_and_flip_signs_in_training():
    n = 10
    ei, x = path_graph(n), torch.randn(n, 6)
    model = zoo.build("graph_transformer", in_dim=6, out_dim=3, hidden_dim=8, num_layers=1, pe_dim=3)
    model.eval()
    with_pe = model(ei, x)
    torch.testing.assert_close(model(ei, x), with_pe)  # eval: deterministic
    h0 = model.lin_in(x)
    assert not torch.allclose(model.encode(as_graph(ei, x, "add"), x), h0)
    model.train()
    outs = {tuple(model.encode(as_graph(ei, x, "add"), x)[0].round(decimals=5).tolist()) for _ in range(20)}
    assert len(outs) > 1  # random sign flips


def test_transformer_options_and_errors():
    with pytest.raises(ValueError, match="divisible|multiple"):
        zoo.build("graph_transformer", in_dim=6, out_dim=3, hidden_dim=10, heads=3)
    with pytest.raises(ValueError, match="pe_dim"):
        zoo.build("graph_transformer", in_dim=6, out_dim=3, pe_dim=-1)
    with pytest.raises(ValueError, match="placement"):
        zoo.build("graph_transformer", in_dim=6, out_dim=3, placement="middle")
    m = zoo.build("graph_transformer", in_dim=6, out_dim=3, norm="pairnorm")
    assert type(m.layers[0].norm1).__name__ == "PairNorm"
    m = zoo.build("graph_transformer", in_dim=6, out_dim=3, norm="lipschitz")
    assert m.layers[0].attention.score_norm is m.norm_plugin


@pytest.mark.parametrize("family", ["graph_transformer", "universal_transformer"])
def test_residual_none_is_the_block_without_skips(family):
    """``residual="none"``: Y = N1(MP(X)), X' = N2(FFN(Y)) (the Oxford code's block); the default adds the skips."""
    ei = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    x = torch.randn(4, 6)
    torch.manual_seed(0)
    plain = zoo.build(family, in_dim=6, out_dim=3, hidden_dim=8, heads=2, num_layers=2, pe_dim=0,
                      residual="none").eval()
    torch.manual_seed(0)
    skips = zoo.build(family, in_dim=6, out_dim=3, hidden_dim=8, heads=2, num_layers=2, pe_dim=0).eval()
    g = as_graph(ei, x, "add")
    h = plain.lin_in(x)
    for index in range(2):
        block = plain.block(index)
        mp, _ = block.attention(g, h)
        y = block.norm1(mp)
        h = block.norm2(block.ffn(y))
    torch.testing.assert_close(plain(ei, x), plain.lin_out(h))
    assert not torch.allclose(plain(ei, x), skips(ei, x))  # same weights, the skips change the output


def test_residual_errors_name_the_values_and_the_fix():
    with pytest.raises(ValueError, match="identity"):
        zoo.build("graph_transformer", in_dim=6, out_dim=3, hidden_dim=8, residual="linear")
    with pytest.raises(ValueError, match="placement='post'"):
        zoo.build("graph_transformer", in_dim=6, out_dim=3, hidden_dim=8, residual="none", placement="pre")


def test_unimp_gate_mixes_root_and_message():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    x = torch.randn(3, 6)
    model = zoo.build("unimp", in_dim=6, out_dim=3, hidden_dim=8, num_layers=1, heads=2, out_heads=2).eval()
    layer = model.layers[0]
    g = as_graph(ei, x, "keep")
    out, alpha = layer(g, x)
    # with one in-edge per node, alpha = 1 and m_v = mean over heads of W_v h_u
    assert torch.allclose(alpha, torch.ones_like(alpha))
    m = layer.lin_value(x).view(3, 2, -1)[g.src].mean(1)
    m = torch.zeros_like(m).index_add(0, g.dst, m)
    root = layer.lin_root(x)
    beta = torch.sigmoid(layer.lin_gate(torch.cat([root, m, root - m], -1)))
    torch.testing.assert_close(out, beta * root + (1 - beta) * m)
    ungated = zoo.build("unimp", in_dim=6, out_dim=3, hidden_dim=8, num_layers=1, gated=False)
    assert ungated.layers[0].lin_gate is None
