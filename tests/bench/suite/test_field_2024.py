"""field_2024: the cells run the presets they name, Luo et al.'s optimiser settings as their script,
and Luo et al.'s split (``--rand_split_class --seed 123``) is the zoo's per-class split with seed 123."""
from __future__ import annotations

import re

import pytest
import torch

import zoo
from zoo.bench.suite.load import load_suite
from zoo.datasets.splits import per_class_split


def _cells():
    return load_suite("field_2024").resolved()["cells"]


@pytest.mark.slow  # resolves the suite's 515 cells and reads a preset per cell (~11 s)
def test_cells_that_name_a_preset_repeat_its_values():
    checked = 0
    for c in _cells():
        m = c["config"]["model"]
        if "." not in m["name"]:
            continue
        family, tag = m["name"].split(".")
        preset = zoo.registry.preset(family, tag)
        for key, value in m["kwargs"].items():
            if key in preset:
                assert preset[key] == value, (c["config"]["run"]["variant"], key)
        assert m["norm"] == preset.get("norm", "none"), f"{m['name']}: the cell's norm would replace the preset's"
        checked += 1
    assert checked > 50


@pytest.mark.slow  # resolves the suite's 515 cells (~2 s)
def test_luo_cells_train_as_the_authors_script():
    for c in _cells():
        m, t = c["config"]["model"], c["config"]["train"]
        if not m["name"].startswith(("gat.luo2024", "gcn.luo2024")) or c["config"]["task"]["dataset"] in (
                "cornell", "texas", "wisconsin", "actor", "tolokers"):  # the Chameleon recipe, our choice
            continue
        family, tag = m["name"].split(".")
        reference = zoo.model_card(family).presets and zoo.registry.catalogue()[family]["presets"][tag]["reference"]
        args = dict(re.findall(r"--(\w+) (\S+)", reference))
        assert t["lr"] == float(args["lr"]) and t["weight_decay"] == float(args["weight_decay"])
        assert t["epochs"] == int(args.get("epochs", 500))  # main.py's default
        assert t["optimizer"] == "adam" and t["loss_threshold"] == 0.0 and t["select"] == "val_metric"


def luo_class_rand_splits(y: torch.Tensor, per_class: int, valid: int, test: int):
    """LUOyk1999/tunedGNN medium_graph/data_utils.py class_rand_splits, after main.py's fix_seed(123)."""
    torch.manual_seed(123)
    idx = torch.arange(y.shape[0])
    train, rest = [], []
    for c in y.unique():
        idx_c = idx[y == c]
        perm = idx_c[torch.randperm(idx_c.shape[0])]
        train += perm[:per_class].tolist()
        rest += perm[per_class:].tolist()
    rest = torch.as_tensor(rest)
    rest = rest[torch.randperm(rest.shape[0])]
    return torch.as_tensor(train), rest[:valid], rest[valid:valid + test]


def test_the_zoo_split_with_data_seed_123_is_luos_split():
    y = torch.randint(0, 7, (2708,), generator=torch.Generator().manual_seed(5))
    train, val, test = luo_class_rand_splits(y, 20, 500, 1000)
    masks = per_class_split(y, 123, train_per_class=20, val_per_class=None, num_val=500, num_test=1000)
    for mask, idx in zip(masks, (train, val, test)):
        assert torch.equal(mask.nonzero().flatten(), idx.sort().values)
