"""Suite files: valid suites expand as specified; every kind of invalid input is a clear error."""
from __future__ import annotations

import copy

import pytest

from zoo.bench.suite.load import list_suites, load_suite, parse_suite
from zoo.bench.suite.schema import SuiteError

BASE = {
    "suite": {"name": "t"},
    "defaults": {"dataset": "twin", "model": "gat", "epochs": 3, "hidden_dim": 8},
    "grid": {"num_layers": [1, 2], "init": ["xav", "bal_o"], "seed": [0, 1]},
    "quick": {"defaults": {"epochs": 1}, "grid": {"seed": [0]}},
}


def parse(**changes):
    raw = copy.deepcopy(BASE)
    for k, v in changes.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = v
    return parse_suite(raw)


def test_expansion_grouping_and_ids():
    s = parse()
    assert len(s.cells) == 8 and len(s.groups()) == 2  # groups: one per depth; seeds x inits stacked
    assert {c.config["model"]["init"] for c in s.cells} == {"xavier", "balanced_orthogonal"}  # canonical names
    assert len({c.id for c in s.cells}) == 8
    assert [c.id for c in parse().cells] == [c.id for c in s.cells]  # stable ids
    q = parse_suite(copy.deepcopy(BASE), quick=True)
    assert len(q.cells) == 4 and all(c.config["train"]["epochs"] == 1 for c in q.cells)


def test_overrides_variants_excludes_and_namespaces():
    s = parse(grid={"num_layers": [1, 2], "variant": ["a", "b"]},
              variants={"a": {"model": "gatv2", "share_weights": False}, "b": {"norm": "pairnorm"}},
              override=[{"when": {"num_layers": 2, "variant": "a"}, "lr": 0.5}],
              exclude=[{"when": {"num_layers": 1, "variant": "b"}}],
              defaults={**BASE["defaults"], "data.k": 3, "arch.self_loops": "add"}, quick=None)
    assert len(s.cells) == 3
    by = {(c.config["model"]["kwargs"]["num_layers"], c.config["run"]["variant"]): c.config for c in s.cells}
    assert by[(2, "a")]["train"]["lr"] == 0.5 and by[(1, "a")]["train"]["lr"] != 0.5
    assert by[(2, "a")]["model"]["name"] == "gatv2" and by[(2, "a")]["model"]["kwargs"]["share_weights"] is False
    assert by[(2, "b")]["model"]["norm"] == "pairnorm"
    assert all(c["task"]["options"] == {"k": 3} for c in by.values())
    assert all(c["model"]["kwargs"]["self_loops"] == "add" for c in by.values())


@pytest.mark.parametrize("changes,match", [
    ({"sweet": {}}, r"unknown key\(s\) 'sweet'.*Valid keys"),
    ({"suite": {"name": "t", "titel": "x"}}, r"'titel' \(did you mean 'title'"),
    ({"suite": {}}, r"needs a 'name'"),
    ({"defaults": {**BASE["defaults"], "lernrate": 0.1}}, r"unknown key\(s\) 'lernrate'.*Valid keys"),
    ({"defaults": {**BASE["defaults"], "hedas": 2}}, r"did you mean 'heads'"),
    ({"defaults": {**BASE["defaults"], "model": "gta"}}, r"unknown model 'gta'.*Did you mean"),
    ({"defaults": {**BASE["defaults"], "dataset": "coraa"}}, r"unknown dataset 'coraa'.*'cora'"),
    ({"grid": {**BASE["grid"], "init": ["bal_q"]}}, r"unknown init 'bal_q'"),
    ({"defaults": {**BASE["defaults"], "norm": "lipshitz"}}, r"unknown norm 'lipshitz'.*lipschitz"),
    ({"defaults": {**BASE["defaults"], "optimizer": "adma"}}, r"unknown optimizer 'adma'.*adam"),
    ({"defaults": {**BASE["defaults"], "self_loops": True}}, r"'self_loops' is an option of model .* arch.self_loops"),
    ({"defaults": {**BASE["defaults"], "arch.kk": 1}}, r"model 'gat' has no option 'kk'"),
    ({"defaults": {**BASE["defaults"], "data.depth": 3}}, r"dataset 'twin' has no option 'depth'"),
    ({"defaults": {**BASE["defaults"], "in_dim": 3}}, r"set from the dataset"),
    ({"defaults": {**BASE["defaults"], "lr": "fast"}}, r"'lr' must be int or float"),
    ({"defaults": {**BASE["defaults"], "epochs": -1}}, r"epochs must be >= 0"),
    ({"defaults": {**BASE["defaults"], "select": "best"}}, r"select must be one of"),
    ({"defaults": {**BASE["defaults"], "transforms": ["normalise_featurs"]}}, r"unknown transform"),
    ({"grid": {**BASE["grid"], "seed": []}}, r"axis 'seed' must be a non-empty list"),
    ({"grid": {**BASE["grid"], "seed": 3}}, r"axis 'seed' must be a non-empty list"),
    ({"grid": {**BASE["grid"], "variant": ["zz"]}}, r"unknown variant 'zz'"),
    ({"variants": {"a": {}}}, r"no 'variant' axis"),
    ({"override": [{"lr": 0.1}]}, r"needs a 'when' table"),
    ({"override": [{"when": {"depht": 2}, "lr": 0.1}]}, r"tests key\(s\) \['depht'\]"),
    ({"exclude": [{"when": {"seed": [0, 1]}}]}, r"expands to no cells"),
    ({"exclude": [{"when": {"seed": 0}, "lr": 1}]}, r"exactly one 'when'"),
    ({"grid": {**BASE["grid"], "seed": [0, 0]}}, r"duplicates cell"),
    ({"defaults": {**BASE["defaults"], "hidden_dim": 6, "heads": 4}}, r"cannot be built.*divisible"),
    ({"leaderboard": {"metric": "accuracy"}}, r"metric must be one of"),
    ({"leaderboard": {"colums": "k"}}, r"'colums' \(did you mean 'columns'"),
    ({"quick": {"grid": {"depth": [1]}}}, None),
    ({"quick": {"defalts": {}}}, r"'defalts' \(did you mean 'defaults'"),
    ({"suite": {"name": "t", "mode": "fly"}}, r"mode must be one of"),
])
def test_invalid_suites_are_explained(changes, match):
    if match is None:  # a [quick] axis that is not in the suite is an error in --quick form only
        raw = copy.deepcopy(BASE)
        raw.update(changes)
        parse_suite(raw)
        with pytest.raises(SuiteError, match=r"axes \['depth'\] are not in \[grid\]"):
            parse_suite(raw, quick=True)
        return
    with pytest.raises((SuiteError, ValueError, TypeError), match=match):
        parse(**changes)


def test_quick_form_requires_quick_table():
    with pytest.raises(SuiteError, match="no \\[quick\\] table"):
        parse_suite({k: v for k, v in copy.deepcopy(BASE).items() if k != "quick"}, quick=True)


#: suites whose thousands of cells take several seconds to resolve twice: with the slow tests
SLOW_TO_RESOLVE = ("nonlocal_energy", "lipschitz_table1")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_TO_RESOLVE else n
                                  for n in list_suites()])
def test_shipped_suites_parse_in_both_forms(name):
    full = load_suite(name)
    quick = load_suite(name, quick=True)
    assert 0 < len(quick.cells) < len(full.cells) or name == "quick"
    assert full.meta.get("paper") and full.meta.get("title")
    if full.reported and full.reported["entries"]:  # paper numbers carry a table reference and match at least one cell
        from zoo.bench.analyze.board import find_reported as _find_reported

        column = 2 if full.leaderboard["metric"] == "pruned" else None  # pruned: the column is the layer
        matched = [e for c in full.cells if (e := _find_reported(full.reported, c.config, full.leaderboard, column))]
        assert matched, f"{name}: no reported number matches any cell"


#: quick forms known to train some cells longer, and why (their end-to-end runs are marked slow)
LONG_QUICK_FORMS = {"oxford_table3": "GAT / GATDB override epochs = 2000 with patience 100 (report §5.2)"}


@pytest.mark.parametrize("name", [n for n in list_suites() if n not in LONG_QUICK_FORMS])
def test_every_quick_cell_trains_for_the_quick_forms_epochs(name):
    """Regression: an [[override]] that sets ``epochs`` wins over [quick]'s, so balance_table6's quick
    form trained its LN-authors arms for 1000 epochs (8 heads x 64, L = 10) and hung CI for minutes.
    A quick form must stay quick: every cell at most the [quick] table's own epoch count."""
    suite = load_suite(name, quick=True, validate_models=False)  # the dry build: test_shipped_suites_parse_in_both_forms
    quick_epochs = ((suite.raw.get("quick") or {}).get("defaults") or {}).get("epochs")
    if quick_epochs is None:
        pytest.skip(f"suite {name}'s [quick] sets no epochs")
    slow = sorted({c.config["train"]["epochs"] for c in suite.cells if c.config["train"]["epochs"] > quick_epochs})
    assert not slow, f"{name}: quick cells train for {slow} epochs, not {quick_epochs}"
