"""Dataset options are validated like model options: a switch takes only
true/false, numbers take numbers, the seed is an integer, the root is a folder — one line each."""
from __future__ import annotations

import numpy as np
import pytest

import zoo.datasets as zd


@pytest.mark.parametrize("name, option, value", [
    ("cornell", "undirected", "false"),
    ("cornell", "undirected", "False"),
    ("cornell", "undirected", "no"),
    ("cornell", "dedupe_edges", "0"),
    ("cornell", "no_self_loops", 1.5),
    ("cornell", "no_self_loops", 1),
    ("cora", "remove_isolated", "False"),
    ("twin", "all_permutations", "true"),
    ("cornell", "download", "no"),
])
def test_switches_take_only_booleans(name, option, value):
    with pytest.raises(TypeError, match=rf"option {option} must be true or false, got {value!r}"):
        zd.load(name, **{option: value})


@pytest.mark.parametrize("option, value, kind", [
    ("train_per_class", "20", "an integer"), ("train_per_class", 2.5, "an integer"),
    ("train_per_class", True, "an integer"), ("train_ratio", "0.6", "a number"),
])
def test_numbers_take_numbers(option, value, kind):
    with pytest.raises(TypeError, match=f"option {option} must be {kind}"):
        zd.load("cornell", **{option: value})


def test_valid_options_still_load():
    task = zd.load("twin", all_permutations=False, num_train=8, seed=np.int64(1))
    assert task.data is not None or task.graphs is not None


@pytest.mark.parametrize("seed", ["a", 1.5, True, None])
def test_seed_must_be_an_integer(seed):
    with pytest.raises(TypeError, match=f"seed must be an integer, got {seed!r}"):
        zd.load("twin", seed=seed)


def test_root_that_is_a_file(tmp_path, monkeypatch):
    file = tmp_path / "not_a_folder"
    file.write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        zd.load("twin", root=file)
    monkeypatch.setenv("ZOO_DATA", str(file))
    with pytest.raises(ValueError, match=r"\$ZOO_DATA=.* is a file, not a folder"):
        zd.load("twin")


@pytest.mark.parametrize("value", ["False", "no", 0, 1.5])
def test_suite_and_set_refuse_non_boolean_switches_at_load(value, tmp_path, monkeypatch, capsys):
    """`--set data.undirected=False` (a bare word: the string 'False') fails before any training."""
    from zoo.bench.suite.load import parse_suite
    from zoo.bench.suite.schema import SuiteError
    from zoo.cli import main

    raw = {"suite": {"name": "opts"}, "defaults": {"dataset": "cornell", "model": "gat", "epochs": 1,
                                                   "num_layers": 1, "data.undirected": value},
           "grid": {"seed": [0]}, "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"}}
    with pytest.raises(SuiteError, match="option undirected must be true or false"):
        parse_suite(raw)
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    out = tmp_path / "o"
    argv = ["train", "--model", "gat", "--dataset", "cornell", "--num-layers", "1", "--epochs", "1", "--quiet",
            "--out", str(out), "--set", f"data.undirected={value}"]
    assert main(argv) == 2
    assert "option undirected must be true or false" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()
