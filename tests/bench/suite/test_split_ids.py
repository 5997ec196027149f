"""One split of the data, one cell id: "no split given" is the dataset's default split, and every spelling of
a split resolves to one form (a dataset of several stored splits names the one that ran; a dataset's own named
split is ``None``)."""
from __future__ import annotations

import pytest

import zoo
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.plugins import dataset_spec
from zoo.datasets import load


def _cell(dataset, **task):
    raw = {"suite": {"name": "t"}, "defaults": {"dataset": dataset, "model": "gat", "epochs": 1, **task}}
    return parse_suite(raw, validate_models=False).cells[0]


#: dataset -> (the form its config holds, the spellings of that split, another split)
SAME = {
    "minesweeper": (0, [{}, {"split": 0}, {"split": "geom_gcn"}], {"split": 1}),
    "cornell": (0, [{}, {"split": 0}, {"split": "Geom-GCN"}], {"split": "per_class"}),
    "cora": (None, [{}, {"split": "public"}, {"split": "Public"}], {"split": 0}),
    "amazon_photo": (None, [{}, {"split": "per_class"}, {"split": "random"}, {"split": "random_per_class"}],
                     {"split": "ratio"}),
    "ogbg_molhiv": (None, [{}, {"split": "official"}, {"split": "scaffold"}], None),
    "twin": (None, [{}, {"split": "random"}], None),
}


@pytest.mark.parametrize("dataset", sorted(SAME))
def test_every_spelling_of_a_split_is_one_cell(dataset):
    form, spellings, other = SAME[dataset]
    cells = [_cell(dataset, **s) for s in spellings]
    assert {c.id for c in cells} == {cells[0].id}
    assert all(c.config["task"]["split"] == form and type(c.config["task"]["split"]) is type(form) for c in cells)
    if other is not None:
        assert _cell(dataset, **other).id != cells[0].id


def test_other_random_split_names_get_one_spelling():
    assert _cell("cora", split="random_per_class").id == _cell("cora", split="per_class").id
    assert _cell("cornell", split="random_ratio").config["task"]["split"] == "ratio"


def test_zoo_fit_records_one_cell_for_no_split_and_the_default_split():
    fit = dict(num_layers=1, hidden_dim=4, epochs=1, keep_models=False, progress=False)
    plain = zoo.fit("gat", "cornell", **fit).cells[0]
    explicit = zoo.fit("gat", "cornell", split=0, **fit).cells[0]
    loaded = zoo.fit("gat", load("cornell"), **fit).cells[0]
    assert plain.id == explicit.id == loaded.id
    assert plain.config["task"]["split"] == 0


@pytest.mark.parametrize("dataset", ["cornell", "cora", "amazon_photo", "twin"])
def test_the_default_split_is_the_one_the_loader_runs_without_one(dataset):
    """The canonical form is only right if it names the data the loader makes when no split is given."""
    from zoo.bench.suite.resolve import _default_split, canonical_split

    default = _default_split(dataset_spec(dataset))
    assert load(dataset).fingerprint() == load(dataset, split=default).fingerprint()
    assert canonical_split(dataset, None) == canonical_split(dataset, default)


def test_where_finds_a_split_by_any_of_its_spellings():
    from zoo.bench.suite.selection import select_where

    raw = {"suite": {"name": "t"}, "defaults": {"model": "gat", "epochs": 1},
           "grid": {"dataset": ["cora", "amazon_photo", "cornell"], "split": ["per_class"]}}
    suite = parse_suite(raw, validate_models=False)
    assert [c.config["task"]["split"] for c in suite.cells] == ["per_class", None, "per_class"]
    picked = select_where(suite, {"split": ["per_class"]})
    assert [c.config["task"]["dataset"] for c in picked] == ["cora", "amazon_photo", "cornell"]
    plain = parse_suite({**raw, "grid": {"dataset": ["cora", "amazon_photo", "cornell"]}}, validate_models=False)
    assert [c.config["task"]["dataset"] for c in select_where(plain, {"split": ["public", 0]})] == ["cora", "cornell"]
