"""zoo.fit's arguments as a new user writes them: one clear line each, names spelled any way."""
from __future__ import annotations

import pytest

import zoo
from zoo.trainer.loggers import CSVLogger

FAST = dict(num_layers=1, hidden_dim=4, epochs=1, keep_models=False)


def test_an_unknown_device_is_one_line():
    with pytest.raises(ValueError, match=r"^unknown device 'gpu'; use cpu, cuda or cuda:N \(e.g. cuda:1\)$"):
        zoo.fit("gat", "cornell", device="gpu", **FAST)


def test_a_split_per_seed_says_how_to_run_it():
    with pytest.raises(ValueError, match="data_seed='seed' draws each seed its own split.*once per seed"):
        zoo.fit("gat", "cornell", split="ratio", data_seed="seed", seeds=[0, 1], **FAST)


def test_one_callback_need_not_be_a_list(tmp_path):
    history = zoo.fit("gat", "cornell", callbacks=CSVLogger(tmp_path / "fit.csv"), **FAST)
    assert (tmp_path / "fit.csv").read_text().startswith("epoch,replica,")
    assert history.final


def test_names_are_names_in_any_spelling():
    cell = zoo.fit("gat", "cornell", precision="BF16", lr_scheduler="Step",
                   lr_scheduler_kwargs={"step_size": 1}, **FAST).cells[0]
    assert cell.config["train"]["precision"] == "bf16" and cell.config["train"]["lr_scheduler"] == "step"
    model = zoo.build("gat", in_dim=4, out_dim=3, num_layers=1, hidden_dim=4, init="Bal-O")
    assert model.build_config["init"] == "balanced_orthogonal"  # the registered name
