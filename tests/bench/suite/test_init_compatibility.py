"""An init that does not apply to an architecture (a balanced init with a norm that breaks the
conservation law) is refused when the cells are resolved, not discovered when its group trains."""
from __future__ import annotations

import pytest
from torch import nn

import zoo
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import SuiteError
from zoo.inits import init_incompatibility, register_init
from zoo.inits._registry import INITS, _CHECKS

GRID = {"suite": {"name": "grid"}, "defaults": {"model": "gat", "dataset": "cornell", "num_layers": 2},
        "grid": {"init": ["xavier", "bal_o"], "norm": ["none", "lipschitz"]}}


def test_a_suite_with_a_balanced_init_and_lipschitz_norm_is_refused_at_load():
    with pytest.raises(SuiteError, match=r"init 'balanced_orthogonal' does not apply to model 'gat' with norm "
                                         r"'lipschitz' and \{'num_layers': 2\} \(norm 'lipschitz' .*breaks the "
                                         r"rescaling symmetry; init_kwargs = \{strict = false\} balances anyway.*"
                                         r"\[\[exclude\]\] those cells, e.g. when = \{init = \"balanced_orthogonal\""):
        parse_suite(GRID, validate_models=False)


def test_excluding_the_combination_keeps_the_valid_cells():
    suite = parse_suite({**GRID, "exclude": [{"when": {"init": "bal_o", "norm": "lipschitz"}}]})
    assert sorted((c.config["model"]["init"], c.config["model"]["norm"]) for c in suite.cells) == [
        ("balanced_orthogonal", "none"), ("xavier", "lipschitz"), ("xavier", "none")]


def test_non_strict_balancing_is_accepted():
    raw = {**GRID, "defaults": {**GRID["defaults"], "init_kwargs": {"strict": False}}}
    assert len(parse_suite(raw, validate_models=False).cells) == 4


def test_zoo_fit_refuses_before_training():
    with pytest.raises(SuiteError, match="init 'balanced_orthogonal' does not apply"):
        zoo.fit("gat", "cornell", inits=["xavier", "bal_o"], norm="lipschitz", num_layers=2, epochs=1)


def test_zoo_diagnose_excludes_the_incompatible_init_and_says_so():
    with pytest.warns(UserWarning, match="init 'bal_o' excluded for norm=lipschitz"):
        d = zoo.diagnose("gat", "cornell", inits=["xavier", "bal_o"], norm=["none", "lipschitz"], epochs=1,
                         num_layers=2, hidden_dim=8)
    assert sum(len(h.cells) for h in d.history) == 3


def test_a_plugin_init_declares_its_own_check():
    def needs_two_layers(model, **_):
        return [] if len(model.layers) >= 2 else ["needs at least two layers"]

    @register_init("test_two_layer_init", check=needs_two_layers)
    def two_layer_init(model: nn.Module) -> None:
        pass

    try:
        one = zoo.build("gat", in_dim=4, out_dim=2, num_layers=1)
        assert init_incompatibility(one, "test_two_layer_init") == "needs at least two layers"
        assert init_incompatibility(zoo.build("gat", in_dim=4, out_dim=2, num_layers=2), "test_two_layer_init") is None
    finally:
        _CHECKS.pop("test_two_layer_init", None)
        INITS._items.pop("test_two_layer_init", None)


def test_the_shipped_balance_suite_balances_its_elu_cells_without_the_law():
    """Tables 3/4 report balanced inits with ELU: those cells balance with strict = false (else refused)."""
    from tests.conftest import REPO
    from zoo.bench.suite.load import load_suite

    suite = load_suite(REPO / "benchmarks" / "suites" / "balance_table3_4.toml", validate_models=False)
    elu = [c for c in suite.cells if c.config["model"]["kwargs"].get("activation") == "elu"
           and c.config["model"]["init"] != "xavier"]
    assert elu and all(c.config["model"]["init_kwargs"] == {"strict": False} for c in elu)
