"""``research/probe_ops_per_epoch.py`` counts the ops of a training epoch: a deeper model of the
same slice launches more ops per epoch, views are told apart, and a bad slice fails in one line."""
from __future__ import annotations

import pytest

from tests.conftest import research_script

probe = research_script("probe_ops_per_epoch.py")

#: The quick suite's cheapest cells: Cora, GAT, Xavier (100 epochs; the probe sets 2 and 4).
SLICE = ["--where", "dataset=cora", "--where", "model=gat", "--where", "init=xavier"]


def _per_epoch(tmp_path, num_layers):
    where = SLICE + ["--where", f"num_layers={num_layers}"]
    return probe.ops_per_epoch("quick", where, str(tmp_path / str(num_layers)))


def test_a_deeper_model_launches_more_ops_per_epoch(tmp_path):
    shallow, deep = _per_epoch(tmp_path, 2), _per_epoch(tmp_path, 10)
    assert 0 < sum(shallow.values()) < sum(deep.values())
    assert any(probe.is_view(op) for op in deep) and any(not probe.is_view(op) for op in deep)


def test_is_view():
    assert probe.is_view("aten.view.default") and probe.is_view("aten.permute.default")
    assert not probe.is_view("aten.mul.Tensor") and not probe.is_view("zoo.gather_rows.default")


def test_an_empty_slice_fails_in_one_line(capsys):
    """In this process: the script's ``main`` as ``python research/probe_ops_per_epoch.py`` calls it."""
    with pytest.raises(SystemExit) as e:
        probe.main(["quick", "--where", "dataset=nowhere"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no cell of suite 'quick' has dataset=nowhere" in err.strip().splitlines()[-1], err
