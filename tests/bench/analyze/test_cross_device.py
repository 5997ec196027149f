"""Records of one cell made on two devices (zoo.bench.analyze.cross_device): the committed H200 records
agree with the committed CPU records by the stated rule, and the rule flags what rounding cannot explain."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from zoo.bench.analyze import cross_device as xd
from zoo.bench.store.records import read_records

ROOT = Path(__file__).resolve().parents[3]
CPU = ROOT / "docs" / "reproduction" / "records" / "balance_table2"
H200 = ROOT / "docs" / "reproduction" / "devices" / "h200-2026-11-28"


@pytest.fixture(scope="module")
def records():
    return read_records(CPU), read_records(H200)


def _cell_of(rows, layers, init):
    return [r for r in rows if r["config"]["model"]["kwargs"]["num_layers"] == layers
            and r["config"]["model"]["init"] == init]


def test_h200_records_agree_with_the_cpu_records(records):
    cpu, gpu = records
    cells = xd.compare(cpu, gpu)
    pairs = [p for c in cells for p in c.pairs]
    assert len(pairs) == 45 and len(cells) == 9  # Cornell L = 2 / 5 / 10 x 3 inits, 5 seeds each
    assert sum(p.equal for p in pairs) == 41
    assert not any(c.flagged for c in cells), xd.report_lines(cells)
    assert all(p.tolerance == pytest.approx(1 / 37) for p in pairs)  # one of Cornell's 37 test nodes
    assert xd.summary(cells).startswith("45 runs on two devices in 9 cells: test metric equal in 41")


def test_same_selected_epoch_with_another_result_is_flagged(records):
    cpu, gpu = records
    gpu = copy.deepcopy(gpu)
    run = next(r for r in gpu if r["metrics"]["test"] > 0.1 and
               next(c for c in cpu if c["id"] == r["id"])["epochs_to_best"] == r["epochs_to_best"])
    run["metrics"]["test"] -= 2 / 37  # two test nodes at the same epoch: no rounding does that
    flagged = [p for c in xd.compare(cpu, gpu) for p in c.pairs if p.problem]
    assert [p.id for p in flagged] == [run["id"]] and "same selected epoch" in flagged[0].problem
    run["metrics"]["test"] += 2 / 37
    run["val_loss"] *= 1.05  # and a loss 5 % off at the same epoch
    flagged = [p for c in xd.compare(cpu, gpu) for p in c.pairs if p.problem]
    assert [p.id for p in flagged] == [run["id"]] and "validation loss" in flagged[0].problem


def test_a_cell_moved_by_one_device_is_flagged(records):
    cpu, gpu = records
    gpu = copy.deepcopy(gpu)
    moved = _cell_of(gpu, 2, "xavier")
    for i, r in enumerate(moved):  # parted runs (other selected epochs), all a few nodes better
        r["epochs_to_best"] += 1
        r["metrics"]["test"] += (2 + i % 2) / 37
    cells = xd.compare(cpu, gpu)
    flagged = [c for c in cells if c.flagged]
    assert len(flagged) == 1 and "mean test difference" in flagged[0].problem
    assert not any(p.problem for p in flagged[0].pairs)  # no single run is wrong; the cell moved
    for r in moved:  # the same shift for every run: sd 0, beyond one test node
        r["metrics"]["test"] = next(c for c in cpu if c["id"] == r["id"])["metrics"]["test"] + 2 / 37
    assert [c.problem for c in xd.compare(cpu, gpu) if c.flagged] == ["every run moved by +0.0541"]
    for r in moved:  # one node each: rounding can part every run by that much
        r["metrics"]["test"] = next(c for c in cpu if c["id"] == r["id"])["metrics"]["test"] + 1 / 37
    assert not any(c.flagged for c in xd.compare(cpu, gpu))


def test_only_pairs_across_device_kinds_count(records):
    cpu, gpu = records
    assert xd.compare(cpu, cpu) == [] and xd.compare(gpu, gpu) == []
    assert len([p for c in xd.compare(gpu, cpu) for p in c.pairs]) == 45  # either side may be the reference


def test_test_nodes_and_t_critical():
    assert xd.test_nodes([15 / 37, 16 / 37, 0.0]) == 37
    assert xd.test_nodes([0.5, 1 / 3]) == 6
    assert xd.test_nodes([0.7812345678]) is None  # a ROC-AUC: no test-node resolution
    assert xd.t_critical(4) == 4.604 and xd.t_critical(13) == 3.055 and xd.t_critical(1000) == xd.Z_995


def test_command_exit_status(records, tmp_path, capsys):
    assert xd.main([str(CPU), str(H200)]) == 0
    assert "flagged: 0 runs, 0 cells" in capsys.readouterr().out
    cpu, gpu = records
    bad = copy.deepcopy(gpu)
    for r in _cell_of(bad, 5, "xavier"):
        r["metrics"]["test"] += 3 / 37
    import json
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    assert xd.main([str(CPU), str(path)]) == 1
    assert "FLAGGED" in capsys.readouterr().out
