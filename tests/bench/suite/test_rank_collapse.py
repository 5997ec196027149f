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
        if run["variant"].endswith(("_pure", "_pure_ln", "_two_hop")):  # the text's pure attention
            assert kw["activation"] == "identity"
            assert model["norm"] == ("layernorm" if run["variant"].endswith("_ln") else "none")
        # the last layer is a block like the others wherever the block has more than attention
        has_more = model["norm"] != "none" or kw["activation"] != "identity"
        assert (kw.get("classifier_input") == "activated") == has_more, run["variant"]
    assert min(len(s) for s in seeds.values()) == 10
    assert {c.config["task"]["transforms"] == ["two_hop"] for c in suite.cells
            if c.config["run"]["variant"] == "gat_pure_two_hop"} == {True}
