"""The LipschitzNorm paper (Dasoulas et al.) suites: the authors' normalisation variants, PairNorm's placement, Table 1's
validation accuracy (§10.2) and its PubMed depth claim; each fails on the code or data before its fix."""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.conftest import SHIPPED_SUITES_GROUP, awkward_graph, shipped_suite
from tests.papers.shipped import SUITES, finding, suite

pytestmark = pytest.mark.xdist_group(SHIPPED_SUITES_GROUP)  # lipschitz_table1 resolved once


def _released_lipschitznorm(xw, att_src, att_dst, scores, src, dst, n, scale_individually):
    """The released ``LipschitzNorm.forward`` transcribed with torch ops (x = x_j, index = dst)."""
    x = xw[src]                                              # (E, H, C): PyG's x_j
    norm_x = torch.norm(x, dim=-1) ** 2                      # (E, H)
    heads = norm_x.size(1)
    max_norm = torch.zeros(n, heads, dtype=xw.dtype).scatter_reduce(
        0, dst.view(-1, 1).expand(-1, heads), norm_x, "amax", include_self=False).view(-1, 1)
    max_norm = torch.sqrt(max_norm[dst] + norm_x)
    att = torch.cat((att_src.unsqueeze(0), att_dst.unsqueeze(0)), dim=-1)  # (1, H, 2C) as released
    norm_att = 4 * (torch.norm(att, dim=-1) if scale_individually else torch.norm(att))
    return scores / (norm_att * max_norm + 1e-12)


@pytest.mark.parametrize("heads", [1, 2])
@pytest.mark.parametrize("variant", ["authors_code", "authors_code_si"])
def test_lipschitz_authors_code_variant_matches_released_code(heads, variant):
    from zoo.graph import as_graph
    from zoo.ops.segment import segment_softmax

    edge_index, n = awkward_graph()
    x = torch.randn(n, 6, dtype=torch.float64)
    model = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=4 * heads, heads=heads, num_layers=2,
                      norm="lipschitz", norm_kwargs={"variant": variant}).double()
    layer = model.layers[0]
    g = as_graph(edge_index, x)
    _, alpha = layer(g, x)
    xw = layer.lin(x).view(n, heads, -1)
    scores = (xw * layer.att_src).sum(-1)[g.src] + (xw * layer.att_dst).sum(-1)[g.dst]
    ref = _released_lipschitznorm(xw, layer.att_src, layer.att_dst, scores, g.src, g.dst, n,
                                  variant == "authors_code_si")
    expected = segment_softmax(torch.nn.functional.leaky_relu(ref, 0.2), g.dst, n)
    torch.testing.assert_close(alpha, expected, atol=1e-12, rtol=1e-12)
    paper = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=4 * heads, heads=heads, num_layers=2,
                      norm="lipschitz").double()
    paper.load_state_dict(model.state_dict())
    assert not torch.allclose(paper.layers[0](g, x)[1], alpha)  # Eq. 17 is not the released code


def test_lipschitz_variant_is_validated_and_paper_default():
    assert zoo.build("gat", in_dim=3, out_dim=2, norm="lipschitz").norm_plugin.variant == "paper"
    with pytest.raises(ValueError, match="authors_code"):
        zoo.build("gat", in_dim=3, out_dim=2, norm="lipschitz", norm_kwargs={"variant": "author_code"})
    edge_index, n = awkward_graph()
    model = zoo.build("gatv2", in_dim=3, out_dim=2, norm="lipschitz", norm_kwargs={"variant": "authors_code"})
    with pytest.raises(ValueError, match="variant='paper'"):
        model(edge_index, torch.randn(n, 3))


def test_pairnorm_after_activation_placement():
    """The LipschitzNorm authors' DeepGAT: h = PairNorm(ELU(layer(h))) on every hidden layer."""
    from zoo.norms.pairnorm import PairNorm

    edge_index, n = awkward_graph()
    x = torch.randn(n, 5)
    model = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=8, num_layers=3, activation="elu",
                      norm="pairnorm", norm_kwargs={"placement": "post_activation"})
    model.eval()
    g_ref = x
    from zoo.graph import as_graph
    g = as_graph(edge_index, x)
    for index, layer in enumerate(model.layers):
        g_ref, _ = layer(g, g_ref)
        if index < 2:
            g_ref = PairNorm()(torch.nn.functional.elu(g_ref))
    torch.testing.assert_close(model(edge_index, x), g_ref)
    for name in ("lipschitz_table1", "lipschitz_fig5"):
        pn = [c for c in shipped_suite(name).cells if c.config["model"]["norm"] == "pairnorm"]
        assert pn and all(c.config["model"]["norm_kwargs"].get("placement") == "post_activation" for c in pn)


def test_lipschitz_table1_compares_the_validation_accuracy_of_section_10_2():
    raw = suite("lipschitz_table1")
    assert raw["leaderboard"]["metric"] == "val"
    text = (SUITES / "lipschitz_table1.toml").read_text()
    assert "validation classification accuracy" in text and "grid-searches" in text


def test_lipschitz_pubmed_depth_claim_is_encoded():
    f = finding("lipschitz_table1", "lip_deeper_is_better_pubmed_100")
    assert "increasing accuracy as the number of layers is higher" in f["quote"]
    assert f["check"]["kind"] == "increasing"
    assert "increasing accuracy" not in finding("lipschitz_table1", "lip_trains_deep_gat_pubmed_100")["quote"]
