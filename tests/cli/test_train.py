"""``zoo train`` runs exactly the cells ``zoo.fit`` would for the same options, with the one set of
defaults that ``zoo.fit``, ``zoo diagnose`` and a suite's ``[defaults]`` share."""
from __future__ import annotations

import pytest

import zoo
from zoo.bench.store.records import read_records
from zoo.bench.suite.load import parse_suite
from zoo.cli import build_parser, main
from zoo.cli.train import SUITE_KEYS, train_suite
from zoo.fitting import fit_cells

BASE = ["train", "--model", "gat", "--dataset", "cornell"]

#: every option of ``zoo train``: its flags, and the same option as zoo.fit's keyword
OPTIONS = {
    "num_layers": (["--num-layers", "3"], {"num_layers": 3}),
    "hidden_dim": (["--hidden-dim", "16"], {"hidden_dim": 16}),
    "heads": (["--heads", "2"], {"heads": 2}),
    "norm": (["--norm", "pairnorm"], {"norm": "pairnorm"}),
    "optimizer": (["--optimizer", "sgd"], {"optimizer": "sgd"}),
    "lr": (["--lr", "0.1"], {"lr": 0.1}),
    "weight_decay": (["--weight-decay", "0.0005"], {"weight_decay": 5e-4}),
    "epochs": (["--epochs", "7"], {"epochs": 7}),
    "patience": (["--patience", "5"], {"patience": 5}),
    "lr_scheduler": (["--lr-scheduler", "cosine"], {"lr_scheduler": "cosine"}),
    "warmup_epochs": (["--warmup-epochs", "2"], {"warmup_epochs": 2}),
    "grad_clip_norm": (["--grad-clip-norm", "1"], {"grad_clip_norm": 1.0}),
    "precision": (["--precision", "bf16"], {"precision": "bf16"}),
    "flush_subnormals": (["--flush-subnormals"], {"flush_subnormals": True}),
    "dropout": (["--dropout", "0.5"], {"dropout": 0.5}),
    "split": (["--split", "1"], {"split": 1}),
    "transforms": (["--transforms", "normalize_features"], {"transforms": ["normalize_features"]}),
    "dtype": (["--dtype", "float64"], {"dtype": "float64"}),
    "inits": (["--inits", "xavier,bal_o"], {"inits": ["xavier", "bal_o"]}),
    "seeds": (["--seeds", "0-2"], {"seeds": [0, 1, 2]}),
    "set": (["--set", "attn_dropout=0.2", "--set", "data.undirected=true"],
            {"attn_dropout": 0.2, "data.undirected": True}),
    "none": ([], {}),
}


def _train_cells(argv):
    """The cells ``zoo train ARGV`` runs (what :func:`zoo.cli.train.run` hands the runner)."""
    return parse_suite(train_suite(build_parser().parse_args([*BASE, *argv])), source="zoo train").cells


def test_every_suite_key_flag_is_covered():
    assert set(SUITE_KEYS) <= set(OPTIONS), "a new zoo train flag needs its zoo.fit counterpart here"


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_zoo_train_makes_zoo_fits_cells(option):
    argv, kwargs = OPTIONS[option]
    train = _train_cells(argv)
    fit = fit_cells("gat", "cornell", **kwargs)
    assert [c.id for c in train] == [c.id for c in fit]
    assert [c.config for c in train] == [c.config for c in fit]


def test_the_defaults_are_the_suites(tmp_path):
    """One table: a suite naming only the model, dataset and depth, zoo.fit and zoo train resolve the
    same cell, with the suite's trainer defaults (docs/benchmarks.md, "Defaults")."""
    raw = {"suite": {"name": "defaults"}, "defaults": {"model": "gat", "dataset": "cornell", "num_layers": 2}}
    (suite_cell,) = parse_suite(raw, source="test").cells
    (fit_cell,) = fit_cells("gat", "cornell", num_layers=2)
    (train_cell,) = _train_cells(["--num-layers", "2"])
    assert suite_cell.id == fit_cell.id == train_cell.id
    train = suite_cell.config["train"]
    assert (train["optimizer"], train["lr"], train["epochs"]) == ("adam", 0.005, 200)


def test_zoo_train_records_what_zoo_fit_trains(tmp_path, capsys):
    """The new user's check: ``zoo train --model gat --dataset cornell --num-layers 2`` recorded Adam lr
    0.005 while ``zoo.fit("gat", "cornell", num_layers=2)`` trained SGD lr 0.05 (another cell, other
    numbers).  Now the same cell, the same numbers."""
    out = tmp_path / "train"
    assert main([*BASE, "--num-layers", "2", "--hidden-dim", "8", "--epochs", "2", "--quiet", "--out", str(out)]) == 0
    (record,) = read_records(out)
    history = zoo.fit("gat", "cornell", num_layers=2, hidden_dim=8, epochs=2, keep_models=False)
    assert record["id"] == history.cells[0].id
    assert (record["config"]["train"]["optimizer"], record["config"]["train"]["lr"]) == ("adam", 0.005)
    assert record["metrics"] == {k: history.final[0][k] for k in ("train", "val", "test")}


def test_zoo_diagnose_trains_zoo_fits_cells(tmp_path, monkeypatch):
    """``zoo diagnose`` without --optimizer / --lr / --epochs trains the defaults' cells too."""
    import zoo.fitting

    seen = []
    fit = zoo.fitting.fit

    def spy(*args, **kwargs):
        history = fit(*args, **{**kwargs, "epochs": 1 if kwargs.get("epochs") is None else kwargs["epochs"]})
        seen.append(kwargs)
        return history

    monkeypatch.setattr(zoo.fitting, "fit", spy)
    assert main(["diagnose", "gat", "--dataset", "cornell", "--num-layers", "2", "--out", str(tmp_path / "d.html")]) == 0
    assert [(k["optimizer"], k["lr"], k["epochs"]) for k in seen] == [(None, None, None)]  # the table's
