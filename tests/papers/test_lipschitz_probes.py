"""The committed LipschitzNorm probes (issue 23): each probe point differs from its row's search winner only in
what the probe's header says, so a probe result can be read against the winner."""
from __future__ import annotations

from pathlib import Path

import torch

import zoo
from zoo.bench import load_suite
from tests.conftest import awkward_graph

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _configs(probe: str) -> dict:
    """``variant -> config`` of a probe's seed-0 cells."""
    suite = load_suite(BENCHMARKS / probe, validate_models=False)
    return {c.config["run"]["variant"]: c.config for c in suite.cells if c.seed == 0}


def _differences(config: dict, winner: dict) -> dict:
    def flat(c: dict) -> dict:
        model = {k: v for k, v in c["model"].items() if k != "kwargs"}  # name, norm, norm_kwargs, init
        return {**model, **c["model"]["kwargs"], **c["train"], "transforms": c["task"]["transforms"]}

    a, b = flat(config), flat(winner)
    return {k: a.get(k) for k in set(a) | set(b) if a.get(k) != b.get(k)}


def test_table3_probe_points_change_one_setting_of_the_search_winner():
    """GAT-Lip-res's winner in lipschitz_table3 (8 heads, attention dropout 0.5, lr 0.005, hidden 64)."""
    suite = load_suite("lipschitz_table3", validate_models=False)
    (winner,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "gat_lip_res" and c.seed == 0
                 and c.config["task"]["dataset"] == "cora" and c.config["model"]["kwargs"]["num_layers"] == 15
                 and c.config["model"]["kwargs"].get("heads") == 8
                 and c.config["model"]["kwargs"].get("attn_dropout") == 0.5]
    expected = {"a02": {"attn_dropout": 0.2}, "std": {"bias": True, "transforms": ["normalize_features"]},
                "lr001": {"lr": 0.001}, "lr01": {"lr": 0.01}, "h16": {"hidden_dim": 128}, "elu": {"activation": "elu"},
                "lipcode": {"norm_kwargs": {"variant": "authors_code"}},
                "res_linear": {"residual": "linear"}, "gatres_linear": {"norm": "none", "residual": "linear"}}
    configs = _configs("probe_lipschitz_table3_lipres.toml")
    assert set(configs) == set(expected)
    for variant, config in configs.items():
        assert _differences(config, winner) == expected[variant], variant


def test_table1_ggnn_probe_points_change_one_setting_of_the_search_winner():
    """GGNN's winner in lipschitz_table1 (Cora L = 2: lr 0.01, dropout 0.5, hidden 128, linear output model)."""
    suite = load_suite("lipschitz_table1", validate_models=False)
    (winner,) = [c.config for c in suite.cells if c.config["run"]["variant"] == "ggnn_missing0" and c.seed == 0
                 and c.config["task"]["dataset"] == "cora" and c.config["model"]["kwargs"]["num_layers"] == 2
                 and c.config["train"]["lr"] == 0.01 and c.config["model"]["kwargs"].get("dropout") == 0.5
                 and c.config["model"]["kwargs"]["hidden_dim"] == 128]
    std = {"bias": True, "transforms": ["normalize_features"]}
    expected = {"std_h128": std, "std_h64": {**std, "hidden_dim": 64}, "enc_h128": {"input_encoder": "linear"},
                "h128_d0": {"dropout": 0.0}}
    configs = _configs("probe_lipschitz_table1_ggnn.toml")
    assert set(configs) == set(expected)
    for variant, config in configs.items():
        assert _differences(config, winner) == expected[variant], variant


def test_ggnn_with_an_input_encoder_starts_its_steps_from_the_embedding():
    """enc_h128: the first GGNN step reads the embedded features (no projection of its own), as Li et al.'s steps
    start from a state made of the annotations."""
    edge_index, n = awkward_graph()
    model = zoo.build("ggnn", in_dim=5, out_dim=3, hidden_dim=8, num_layers=2, classifier="linear",
                      input_encoder="linear")
    assert model.layers[0].in_dim == 8 and model.layers[0].project is None
    assert model(edge_index, torch.randn(n, 5)).shape == (n, 3)
