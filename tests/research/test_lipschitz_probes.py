"""The committed LipschitzNorm probes: each probe point differs from its row's search winner only in
what the probe's header says, so a probe result can be read against the winner."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.bench import load_suite
from tests.conftest import REPO, awkward_graph, research_script

# the probes train the papers' models for their points (~18 s in all): with the slow tests
pytestmark = pytest.mark.slow

RESEARCH = REPO / "research"


def _configs(probe: str) -> dict:
    """``variant -> config`` of a probe's seed-0 cells."""
    suite = load_suite(RESEARCH / probe, validate_models=False)
    return {c.config["run"]["variant"]: c.config for c in suite.cells if c.seed == 0}


def _differences(config: dict, winner: dict) -> dict:
    def flat(c: dict) -> dict:
        model = {k: v for k, v in c["model"].items() if k != "kwargs"}  # name, norm, norm_kwargs, init
        return {**model, **c["model"]["kwargs"], **c["train"], "transforms": c["task"]["transforms"]}

    a, b = flat(config), flat(winner)
    return {k: a.get(k) for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _ggnn_winner(suite) -> dict:
    """GGNN's search winner in lipschitz_table1 (Cora L = 2: lr 0.01, dropout 0.5, hidden 128), seed 0."""
    (winner,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "ggnn_missing0" and c.seed == 0
                 and c.config["task"]["dataset"] == "cora" and c.config["model"]["kwargs"]["num_layers"] == 2
                 and c.config["train"]["lr"] == 0.01 and c.config["model"]["kwargs"].get("dropout") == 0.5
                 and c.config["model"]["kwargs"]["hidden_dim"] == 128]
    return winner


def test_table3_probe_points_change_one_setting_of_the_search_winner():
    """The probes sit around GAT-Lip-res's stop-33 winner in lipschitz_table3 (8 heads, attention dropout 0.5, lr
    0.005, hidden 64); since stop 34 the row's winner is its probe point a02 (attention dropout 0.2)."""
    suite = load_suite("lipschitz_table3", validate_models=False)
    (winner,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "gat_lip_res" and c.seed == 0
                 and c.config["task"]["dataset"] == "cora" and c.config["model"]["kwargs"]["num_layers"] == 15
                 and c.config["model"]["kwargs"].get("heads") == 8
                 and c.config["model"]["kwargs"].get("attn_dropout") == 0.5]
    expected = {"a02": {"attn_dropout": 0.2}, "std": {"bias": True, "transforms": ["normalize_features"]},
                "lr001": {"lr": 0.001}, "lr01": {"lr": 0.01}, "h16": {"hidden_dim": 128}, "elu": {"activation": "elu"},
                "lipcode": {"norm_kwargs": {"variant": "authors_code"}},
                "res_linear": {"residual": "linear"}, "gatres_linear": {"norm": "none", "residual": "linear"},
                "heads2": {"heads": 2}, "heads4": {"heads": 4}, "avg": {"hidden_heads": "mean"},
                "a02_elu": {"attn_dropout": 0.2, "activation": "elu"}}
    configs = _configs("probe_lipschitz_table3_lipres.toml")
    assert set(configs) == set(expected)
    for variant, config in configs.items():
        assert _differences(config, winner) == expected[variant], variant


def test_table1_ggnn_probe_points_change_one_setting_of_the_search_winner():
    """GGNN's winner in lipschitz_table1 (Cora L = 2: lr 0.01, dropout 0.5, hidden 128, linear output model)."""
    suite = load_suite("lipschitz_table1", validate_models=False)
    winner = _ggnn_winner(suite)
    std = {"bias": True, "transforms": ["normalize_features"]}
    expected = {"std_h128": std, "std_h64": {**std, "hidden_dim": 64}, "enc_h128": {"input_encoder": "linear"},
                "h128_d0": {"dropout": 0.0}}
    configs = _configs("probe_lipschitz_table1_ggnn.toml")
    assert set(configs) == set(expected)
    for variant, config in configs.items():
        assert _differences(config, winner) == expected[variant], variant


def test_table1_ggnn_fresh_seed_probe_is_the_search_winner_at_unused_seeds():
    """probe_lipschitz_table1_ggnn_seeds.toml: the winner's config exactly, at seeds the suite never ran."""
    suite = load_suite("lipschitz_table1", validate_models=False)
    winner = _ggnn_winner(suite)
    probe = load_suite(RESEARCH / "probe_lipschitz_table1_ggnn_seeds.toml", validate_models=False)
    assert {c.seed for c in probe.cells}.isdisjoint({c.seed for c in suite.cells})
    for cell in probe.cells:
        assert _differences(cell.config, winner) == {}


def test_ggnn_with_an_input_encoder_starts_its_steps_from_the_embedding():
    """enc_h128: the first GGNN step reads the embedded features (no projection of its own), as Li et al.'s steps
    start from a state made of the annotations."""
    edge_index, n = awkward_graph()
    model = zoo.build("ggnn", in_dim=5, out_dim=3, hidden_dim=8, num_layers=2, classifier="linear",
                      input_encoder="linear")
    assert model.layers[0].in_dim == 8 and model.layers[0].project is None
    assert model(edge_index, torch.randn(n, 5)).shape == (n, 3)


def test_glorot_skip_probe_reinitialises_every_learnt_skip():
    """research/probe_lipschitz_table3_glorot_skips.py: the zoo's zero-initialised learnt skips become the cited
    GAT's Glorot-initialised projections; a point without a skip on every layer is refused."""
    probe = research_script("probe_lipschitz_table3_glorot_skips.py")
    build = lambda residual: zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=8, heads=2, num_layers=3,  # noqa: E731
                                       residual=residual)
    assert all(torch.count_nonzero(s.weight) == 0 for s in build("linear").skips)
    model = probe.with_glorot_skips(lambda: build("linear"))()
    for skip in model.skips:
        bound = (6.0 / sum(skip.weight.shape)) ** 0.5
        assert torch.count_nonzero(skip.weight) == skip.weight.numel() and skip.weight.abs().max() <= bound
    with pytest.raises(SystemExit, match="residual = 'linear'"):
        probe.with_glorot_skips(lambda: build("identity"))()


def test_reference_ggnn_probe_gcn_aggregation_weights_messages_as_gcn():
    """research/probe_ggnn_reference.py --aggr gcn: GatedGraphConv's messages carry D^-1/2 (A + I) D^-1/2 weights,
    so the model equals the same weights run through GatedGraphConv with gcn_norm's edges (and differs from add)."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    probe = research_script("probe_ggnn_reference.py")
    edge_index, n = awkward_graph()
    x = torch.randn(n, 5)
    torch.manual_seed(0)
    gcn = probe.ReferenceGGNN(5, 3, hidden=8, steps=2, dropout=0.0, concat=False, aggr="gcn").eval()
    torch.manual_seed(0)
    add = probe.ReferenceGGNN(5, 3, hidden=8, steps=2, dropout=0.0, concat=False, aggr="add").eval()
    weighted_edges, weight = gcn_norm(edge_index, num_nodes=n, add_self_loops=True)
    expected = gcn.out(gcn.ggnn(gcn.embed(x), weighted_edges, weight))
    assert torch.allclose(gcn(x, edge_index), expected)
    assert not torch.allclose(add(x, edge_index), expected)


def test_table1_ggnn_depth1_probe_is_the_search_winner_at_one_layer():
    """probe_lipschitz_table1_ggnn_depth1.toml: the L = 2 winner's config with one layer, at the records' seeds."""
    winner = _ggnn_winner(load_suite("lipschitz_table1", validate_models=False))
    probe = load_suite(RESEARCH / "probe_lipschitz_table1_ggnn_depth1.toml", validate_models=False)
    assert {c.seed for c in probe.cells} == {0, 1, 2, 3, 4}
    for cell in probe.cells:
        assert _differences(cell.config, winner) == {"num_layers": 1}


def test_table1_pubmed_elu_probe_changes_only_what_its_variants_say():
    """probe_lipschitz_table1_elu.toml: the text row's PubMed 100 % cell at L = 15 (gat_lip_missing100) with ELU, and
    ELU with §10.2's dropout 0.5 or lr 0.01."""
    suite = load_suite("lipschitz_table1", validate_models=False)
    (row,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "gat_lip_missing100" and c.seed == 0
              and c.config["task"]["dataset"] == "pubmed" and c.config["model"]["kwargs"]["num_layers"] == 15]
    elu = {"activation": "elu"}
    expected = {"elu": elu, "elu_d05": {**elu, "dropout": 0.5}, "elu_lr01": {**elu, "lr": 0.01}}
    configs = _configs("probe_lipschitz_table1_elu.toml")
    assert set(configs) == set(expected)
    for variant, config in configs.items():
        assert _differences(config, row) == expected[variant], variant


def test_table1_cora_l5_probe_changes_only_what_its_variants_say():
    """probe_lipschitz_table1_cora_l5.toml: the text row's Cora 0 % cell (gat_lip_missing0 at the suite's point, lr
    0.005, no dropout) with GAT's reference configuration, ELU + dropout 0.5, or Zhao & Akoglu's protocol, at
    depths 2-5 (the paper's best depth is 5); the gat_* variants drop LipschitzNorm."""
    suite = load_suite("lipschitz_table1", validate_models=False)
    (row,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "gat_lip_missing0" and c.seed == 0
              and c.config["task"]["dataset"] == "cora" and c.config["model"]["kwargs"]["num_layers"] == 5
              and c.config["train"]["lr"] == 0.005 and not c.config["model"]["kwargs"].get("dropout")]
    elu, norm_features = {"activation": "elu"}, {"transforms": ["normalize_features"]}
    ref = {"bias": True, "dropout": 0.5, "attn_dropout": 0.5, "heads": 8, **norm_features}
    zhao = {**elu, "dropout": 0.6, "attn_dropout": 0.6, "epochs": 1500, **norm_features}
    expected = {"ref_elu": {**ref, **elu}, "ref_elu_lr01": {**ref, **elu, "lr": 0.01}, "ref_relu": ref,
                "elu_d05": {**elu, "dropout": 0.5}, "elu_d05_h128": {**elu, "dropout": 0.5, "hidden_dim": 128},
                "zhao_lip": zhao, "gat_ref_elu": {**ref, **elu, "norm": "none"}, "zhao_gat": {**zhao, "norm": "none"}}
    probe = load_suite(RESEARCH / "probe_lipschitz_table1_cora_l5.toml", validate_models=False)
    seen = set()
    for cell in probe.cells:
        variant, depth = cell.config["run"]["variant"], cell.config["model"]["kwargs"]["num_layers"]
        seen.add(variant)
        extra = {} if depth == 5 else {"num_layers": depth}
        assert _differences(cell.config, row) == {**expected[variant], **extra}, (variant, depth)
    assert seen == set(expected)
