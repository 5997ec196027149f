"""Cost and class of paper cells without records, and the commands filling them
(zoo.bench.analyze.missing_cost)."""
from __future__ import annotations

from zoo.bench.analyze.missing_cost import NEEDS_GPU, RUNS_HERE, fill_commands, missing_cells
from zoo.bench.spec import cost

TABLE = cost.load_dataset_table()
MODEL = cost.load_cost_model()


def value_of(config, key):
    if key in ("dataset",):
        return config["task"][key]
    if key == "model":
        return config["model"]["name"]
    return config["model"]["kwargs"].get(key, config["run"].get(key))


def cells():
    out = []
    for dataset, layers in (("texas_npz", 2), ("texas_npz", 10), ("pubmed", 40)):
        for seed in range(3):
            out.append({"id": f"{dataset}{layers}s{seed}", "group": f"{dataset}{layers}", "config": {
                "model": {"name": "gatv2", "norm": "none", "kwargs": {"num_layers": layers, "hidden_dim": 64}},
                "task": {"dataset": dataset, "options": {}}, "train": {"epochs": 5000, "batch_size": 0},
                "run": {"dtype": "float32", "seed": seed}}})
    return out


ENTRIES = [{"dataset": "texas_npz", "num_layers": 2, "table": "T", "value": 60.0},
           {"dataset": "texas_npz", "num_layers": 10, "table": "T", "value": 50.0},
           {"dataset": "pubmed", "num_layers": 40, "table": "T", "value": 40.0}]


def test_cost_class_and_done_cells():
    miss = missing_cells("s", "train", cells(), ENTRIES, ["texas_npz2s0"], MODEL, TABLE, value_of)
    t2, t10, p40 = miss
    assert [len(m.cells) for m in miss] == [2, 3, 3]  # one texas L=2 seed is done
    group = MODEL.group_seconds([c["config"] for c in cells()[1:3]], 5000, TABLE, "train", "s")
    assert t2.seconds == group  # the pending cells' share of their group (the group of the two)
    assert t2.cls == RUNS_HERE and t10.cls == RUNS_HERE and p40.cls == NEEDS_GPU


def test_fill_commands_per_slice_count_shared_cells_once():
    miss = missing_cells("s", "train", cells(), ENTRIES + [dict(ENTRIES[2], table="U")], [], MODEL, TABLE, value_of)
    cmds = fill_commands("s", miss, value_of)
    assert [c.command() for c in cmds] == [
        "zoo bench s --where dataset=texas_npz --where num_layers=2",
        "zoo bench s --where dataset=texas_npz --where num_layers=10",
        "zoo bench s --where dataset=pubmed --where num_layers=40 --device cuda"]
    assert [c.runs for c in cmds] == [3, 3, 3] and cmds[-1].cells == 2  # two paper cells, three runs
    assert cmds[-1].seconds == miss[2].seconds  # not counted twice
    assert cmds[-1].cls == NEEDS_GPU


def test_pruned_boards_ignore_the_layer_key():
    entry = [{"dataset": "texas_npz", "num_layers": 2, "layer": 1, "table": "T", "value": 1.0}]
    assert not missing_cells("s", "train", cells(), entry, [], MODEL, TABLE, value_of)[0].cells
    assert len(missing_cells("s", "train", cells(), entry, [], MODEL, TABLE, value_of, ignore=("layer",))[0].cells) == 3
