"""rank_collapse: the cells measure what the suite file says — pure masked attention (no nonlinearity,
no norm, no residual) against the same with LayerNorm, every one of the L layers one block of the same
width (a classifier head reads X^L), float64, 10 seeds per cell."""
from __future__ import annotations

from zoo.bench.suite.load import load_suite


def test_cells_follow_the_suite_files_protocol():
    suite = load_suite("rank_collapse", validate_models=False)
    seeds: dict = {}
    for c in suite.cells:
        model, run = c.config["model"], c.config["run"]
        kw = model["kwargs"]
        seeds.setdefault((c.dataset, run["variant"], kw["num_layers"]), set()).add(c.seed)
        assert run["dtype"] == "float64" and c.config["train"]["epochs"] == 0
        assert kw["classifier"] == "linear" and kw["hidden_dim"] == 64 and kw["heads"] == 1
        assert kw.get("residual", "none") == "none" and not kw.get("bias", False)
        if "_pure" in run["variant"]:  # the text's pure attention and its controls
            assert kw["activation"] == "identity"
            assert model["norm"] == ("layernorm" if "_ln" in run["variant"] else "none")
        # the last layer is a block like the others wherever the block has more than attention
        has_more = model["norm"] != "none" or kw["activation"] != "identity"
        assert (kw.get("classifier_input") == "activated") == has_more, run["variant"]
    assert min(len(s) for s in seeds.values()) == 10
    masks = {"_two_hop": ["two_hop"], "_self": ["no_edges"]}
    for c in suite.cells:
        variant = c.config["run"]["variant"]
        want = next((t for end, t in masks.items() if variant.endswith(end)), [])
        assert c.config["task"]["transforms"] == want, variant
