"""Cost and class of paper cells without records, and the commands filling them
(zoo.bench.report.missing_cost)."""
from __future__ import annotations

import pytest

from zoo.bench.report.missing_cost import (DATA_ABSENT, NEEDS_GPU, NO_CELL, RUNS_HERE, absent_datasets, fill_commands,
                                           missing_cells, pending_seconds)
from zoo.bench.plan import cost, cost_file
from zoo.bench.plan.estimate import hours

TABLE = cost.load_dataset_table()
#: a fixed cpu model (the session-4 fit's coefficients and unseen-suite factor), so that the classes these
#: tests are about (pubmed L = 40 needs a GPU, L = 20 runs here) do not move with a refit of the shipped one
MODEL = cost.CostModel({"dense_macs": 1.249e-11, "edge_elements": 1.924e-10, "dropout_elements": 8.854e-10,
                        "layers_per_replica": 5.491e-4}, {}, unseen_suite_factor=1.917)


def value_of(config, key):
    if key in ("dataset",):
        return config["task"][key]
    if key == "model":
        return config["model"]["name"]
    return config["model"]["kwargs"].get(key, config["run"].get(key))


def cells(variants=("a",)):
    out = []
    for dataset, layers in (("texas_npz", 2), ("texas_npz", 10), ("pubmed", 40)):
        for variant in variants:
            suffix = "" if variants == ("a",) else variant
            for seed in range(3):
                out.append({"id": f"{dataset}{layers}{suffix}s{seed}", "group": f"{dataset}{layers}{suffix}", "config": {
                    "model": {"name": "gatv2", "norm": "none", "kwargs": {"num_layers": layers, "hidden_dim": 64}},
                    "task": {"dataset": dataset, "options": {}}, "train": {"epochs": 5000, "batch_size": 0},
                    "run": {"dtype": "float32", "seed": seed, "variant": variant}}})
    return out


def commands(all_cells, entries, done=()):
    miss = missing_cells("s", "train", all_cells, entries, list(done), MODEL, TABLE, value_of)
    seconds = pending_seconds("s", "train", all_cells, list(done), MODEL, TABLE)
    return miss, fill_commands("s", miss, value_of, [c for c in all_cells if c["id"] in seconds], seconds)


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
    miss, cmds = commands(cells(), ENTRIES + [dict(ENTRIES[2], table="U")])
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


def test_fill_commands_name_the_paper_cells_keys_where_the_slice_holds_others():
    """A slice's command runs what it claims: a dataset x depth slice holding other variants than the
    paper's gets ``--where variant=...`` (before, it ran the whole slice while counting only the paper
    cells' runs: lipschitz_table1's 'cora, L = 4, 10 runs' selected 642)."""
    entries = [{"dataset": "texas_npz", "num_layers": 2, "variant": "b", "table": "T", "value": 60.0},
               {"dataset": "texas_npz", "num_layers": 2, "variant": "c", "table": "T", "value": 61.0},
               {"dataset": "pubmed", "num_layers": 40, "table": "T", "value": 40.0}]
    miss, cmds = commands(cells(("a", "b", "c")), entries, done=["texas_npz2cs0"])
    assert [c.command() for c in cmds] == [
        "zoo bench s --where dataset=texas_npz --where num_layers=2 --where variant=b,c",
        "zoo bench s --where dataset=pubmed --where num_layers=40 --device cuda"]
    assert [c.runs for c in cmds] == [5, 9]  # b's 3 and c's 2 pending; pubmed's paper cell is every variant
    assert cmds[0].seconds == pytest.approx(miss[0].seconds + miss[1].seconds)


def test_fill_commands_narrow_only_where_needed():
    entries = [{"dataset": "texas_npz", "num_layers": 2, "variant": "a", "table": "T", "value": 60.0}]
    (_, cmds) = commands(cells(), entries)
    assert [c.command() for c in cmds] == ["zoo bench s --where dataset=texas_npz --where num_layers=2"]


GPU = cost_file.load_cost_model("cuda")


def test_gpu_hours_of_each_command_are_the_cuda_models_estimate_of_its_runs():
    """Each fill command carries the GPU time of the runs it selects (the cuda entry, each pending cell's
    share of its group, shared cells once), and the paper cells carry theirs."""
    from zoo.bench.report.missing_cost import gpu_hours

    all_cells, entries = cells(), ENTRIES + [dict(ENTRIES[2], table="U")]
    seconds = pending_seconds("s", "train", all_cells, [], MODEL, TABLE)
    gpu = pending_seconds("s", "train", all_cells, [], GPU, TABLE)
    miss = missing_cells("s", "train", all_cells, entries, [], MODEL, TABLE, value_of, seconds=seconds, gpu_seconds=gpu)
    cmds = fill_commands("s", miss, value_of, all_cells, seconds, gpu_seconds=gpu)
    pubmed = GPU.group_seconds([c["config"] for c in all_cells[6:9]], 5000, TABLE, "train", "s")
    assert miss[2].gpu_seconds == pytest.approx(pubmed) and cmds[-1].gpu_seconds == pytest.approx(pubmed)
    assert gpu_hours(cmds[-1]) == pytest.approx(pubmed / 3600)
    assert 0 < pubmed < miss[2].seconds  # the GPU is faster than the records' 2-core CPU
    plain = fill_commands("s", miss, value_of, all_cells, seconds)  # built without the cuda estimate
    assert plain[-1].gpu_seconds is None
    with pytest.raises(ValueError, match="no GPU estimate"):
        gpu_hours(plain[-1])


def test_the_page_shows_needs_a_gpu_cells_in_gpu_hours():
    from zoo.bench.render.missing import command_line, missing_markdown, totals_line

    all_cells = cells()
    seconds = pending_seconds("s", "train", all_cells, [], MODEL, TABLE)
    gpu = pending_seconds("s", "train", all_cells, [], GPU, TABLE)
    miss = missing_cells("s", "train", all_cells, ENTRIES, [], MODEL, TABLE, value_of, seconds=seconds, gpu_seconds=gpu)
    cmds = fill_commands("s", miss, value_of, all_cells, seconds, gpu_seconds=gpu)
    total = sum(gpu[c["id"]] for c in all_cells[6:9]) / 3600
    assert f"1 *need a GPU* (3 runs, ≈ {total:,.1f} GPU-hours by a provisional estimate;" in totals_line(miss)
    assert command_line(cmds[-1]).endswith(f"needs a GPU, ≈ {hours(cmds[-1].gpu_seconds)} on one GPU")
    assert "on one GPU" not in command_line(cmds[0])  # runs here: CPU time only
    md = "\n".join(missing_markdown("s", miss, cmds))
    assert "| CPU time | GPU time | class |" in md


def _cells_at(dataset, layers, variants, seeds=3):
    return [{"id": f"{v}s{seed}", "group": v, "config": {
        "model": {"name": "gatv2", "norm": "none", "kwargs": {"num_layers": layers, "hidden_dim": 64}},
        "task": {"dataset": dataset, "options": {}}, "train": {"epochs": 5000, "batch_size": 0},
        "run": {"dtype": "float32", "seed": seed, "variant": v}}} for v in variants for seed in range(seeds)]


def test_a_slice_too_large_to_run_here_is_split_into_its_paper_cells_that_do():
    """Each of pubmed L = 20's three paper cells runs here (under 6 CPU-hours) but their dataset x
    depth slice does not: the slice is split by the key that tells the cells apart, so that every
    *runs here* paper cell has a *runs here* command (before, one 'needs a GPU' line hid them all)."""
    entries = [{"dataset": "pubmed", "num_layers": 20, "variant": v, "table": "T", "value": 60.0} for v in "abc"]
    miss, cmds = commands(_cells_at("pubmed", 20, "abc"), entries)
    assert all(m.cls == RUNS_HERE for m in miss) and sum(m.seconds for m in miss) > 6 * 3600
    assert sorted(c.command() for c in cmds) == [
        f"zoo bench s --where dataset=pubmed --where num_layers=20 --where variant={v}" for v in "abc"]
    assert all(c.cls == RUNS_HERE and c.cells == 1 and c.runs == 3 for c in cmds)
    assert sum(c.seconds for c in cmds) == pytest.approx(sum(m.seconds for m in miss))


def test_a_slice_of_cells_that_each_need_a_gpu_stays_one_command():
    entries = [{"dataset": "pubmed", "num_layers": 40, "variant": v, "table": "T", "value": 60.0} for v in "ab"]
    miss, cmds = commands(_cells_at("pubmed", 40, "ab"), entries)
    assert all(m.cls == NEEDS_GPU for m in miss)
    assert [c.command() for c in cmds] == ["zoo bench s --where dataset=pubmed --where num_layers=40 --device cuda"]


def test_a_paper_cell_over_two_depths_is_split_within_each_depth_only():
    """A paper cell whose number pools two depths (no ``num_layers`` in its entry): when one depth's
    slice is split, its finer commands select that depth's cells only (before, the other depth's
    cells of the same paper cell came along as commands of 0 runs)."""
    def at(layers, variant, seeds=3):  # ids and groups unique across depths
        return [{**c, "id": f"L{layers}{c['id']}", "group": f"L{layers}{c['group']}"}
                for c in _cells_at("pubmed", layers, variant, seeds)]

    cheap = at(2, "a") + at(20, "a")
    costly = at(20, "b", seeds=30)
    entries = [{"dataset": "pubmed", "variant": v, "table": "T", "value": 60.0} for v in "ab"]
    miss, cmds = commands(cheap + costly, entries)
    assert [m.cls for m in miss] == [RUNS_HERE, NEEDS_GPU]
    assert all(c.runs > 0 for c in cmds), [c.command() for c in cmds]
    assert sum(c.runs for c in cmds) == len(cheap) + len(costly)
    assert any(c.command() == "zoo bench s --where dataset=pubmed --where num_layers=20 --where variant=a" for c in cmds)


def test_cells_whose_data_is_absent_here_are_their_own_class():
    """A dataset whose raw files were not in the records' machine's mirror (CoraFull: the size table's
    ``mirrored`` false) is *data absent here*, whatever its cost: not counted as runs here, and its command
    says why; the other datasets keep their classes."""
    from zoo.bench.render.missing import command_line, totals

    table = {**TABLE, "texas_npz": {**TABLE["texas_npz"], "raw_files": ["texas/t.npz"], "mirrored": False},
             "pubmed": {**TABLE["pubmed"], "raw_files": ["PubMed/p.npz"], "mirrored": True}}
    absent = absent_datasets(cells(), table)
    assert absent == {"texas_npz": "texas_npz: texas/t.npz not in the records' machine's data mirror"}
    miss = missing_cells("s", "train", cells(), ENTRIES, [], MODEL, table, value_of, absent=absent)
    assert [m.cls for m in miss] == [DATA_ABSENT, DATA_ABSENT, NEEDS_GPU]
    assert totals(miss)[RUNS_HERE]["cells"] == 0 and totals(miss)[DATA_ABSENT]["runs"] == 6
    seconds = pending_seconds("s", "train", cells(), [], MODEL, table)
    cmds = fill_commands("s", miss, value_of, cells(), seconds, absent=absent)
    assert [c.cls for c in cmds] == [DATA_ABSENT, DATA_ABSENT, NEEDS_GPU]
    assert command_line(cmds[0]).endswith("data absent here (texas_npz: texas/t.npz not in the records' machine's "
                                          "data mirror)")


def test_the_absent_class_does_not_depend_on_this_machines_files(tmp_path, monkeypatch):
    """The committed page must be the same wherever it is made: an empty mirror or an offline machine
    here changes no class (before, every dataset became *data absent here* and the drift test failed on
    a machine without the project's mirror)."""
    table = {**TABLE, "texas_npz": {**TABLE["texas_npz"], "raw_files": ["texas/t.npz"], "mirrored": True}}
    monkeypatch.setenv("ZOO_DATA_MIRROR", str(tmp_path / "empty"))
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "root"))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert absent_datasets(cells(), table) == {}
    assert absent_datasets(cells(), TABLE) == {}  # no ``mirrored`` entry: not known absent


def test_the_size_table_says_which_datasets_the_mirror_lacks(tmp_path):
    from zoo.datasets.mirror import mirrored

    (tmp_path / "PubMed").mkdir()
    (tmp_path / "PubMed" / "p.npz").write_bytes(b"")
    (tmp_path / "geom").mkdir()
    assert mirrored(["PubMed/p.npz", "geom/"], [tmp_path])
    assert not mirrored(["PubMed/p.npz", "texas/t.npz"], [tmp_path])
    assert not mirrored(["other/"], [tmp_path])


def test_a_paper_cell_without_cells_is_not_runs_here():
    """A paper cell no suite cell fills (e.g. a hidden width the suite does not run) costs 0 s because
    nothing would run it: it is *no cell of the suite*, not *runs here*, counted under its own words in
    the summary line (and only where there is one), with no command; the table shows the same class."""
    from zoo.bench.render.missing import missing_html, missing_markdown, totals, totals_line

    nowhere = {"dataset": "texas_npz", "num_layers": 10, "hidden_dim": 512, "table": "T", "value": 50.0}
    miss, cmds = commands(cells(), [*ENTRIES, nowhere])
    assert [m.cls for m in miss] == [RUNS_HERE, RUNS_HERE, NEEDS_GPU, NO_CELL]
    assert totals(miss)[RUNS_HERE]["cells"] == 2 and totals(miss)[NO_CELL] == {
        "cells": 1, "runs": 0, "seconds": 0.0, "gpu_seconds": 0.0}
    line = totals_line(miss)
    assert line.startswith("2 *runs here* (") and line.endswith(", 1 with *no cell of the suite*")
    assert "no cell" not in totals_line(miss[:3])
    assert [c.cells for c in cmds] == [1, 1, 1] and all(c.cls != NO_CELL for c in cmds)
    md = missing_markdown("s", miss, cmds)
    assert md[2].startswith("2 *runs here* (") and "1 with *no cell of the suite*;" in md[2]
    assert "| T | dataset=texas_npz, num_layers=10, hidden_dim=512 | 0 | – | – | no cell of the suite |" in md
    assert "<td>0</td><td>–</td><td>–</td><td>no cell of the suite</td>" in missing_html("s", miss, cmds)
