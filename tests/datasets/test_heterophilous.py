"""The yandex-research heterophilous npz datasets.

Expected values are read from the mirror's npz files with numpy here (and the mirror README's
Cornell figures), not from the zoo's registry.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo.datasets as zd
from zoo.datasets import mirror
from zoo.datasets.heterophilous_npz import NPZ

REPO = Path(__file__).resolve().parents[2]
REAL_MIRROR = Path(os.environ.get(mirror.MIRROR_ENV, "").split(os.pathsep)[0] or REPO / ".." / "shared" / "datasets")
SLOW = {"tolokers", "squirrel_npz", "squirrel_directed_npz", "actor_npz"}


def npz_path(npz: str) -> Path:
    return REAL_MIRROR / "heterophilous" / npz / "raw" / f"{npz}.npz"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("het-root")


@pytest.fixture(autouse=True)
def _mirror(monkeypatch):
    monkeypatch.setenv(mirror.MIRROR_ENV, str(REAL_MIRROR))


def _need(npz: str) -> None:
    if not npz_path(npz).is_file():
        pytest.skip(f"{npz}.npz not in the mirror {REAL_MIRROR}")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NPZ])
def test_statistics_and_splits_match_the_npz_file(name, root):
    npz = NPZ[name][0]
    _need(npz)
    raw = np.load(npz_path(npz))
    edges = raw["edges"]
    n = raw["node_features"].shape[0]
    directed = "directed" in npz
    for mode in ("as_stored", "undirected"):
        task = zd.load(name, root=root, edges=mode, split=3)
        d = task.data
        assert (d.num_nodes, d.num_features, task.num_classes) == (n, raw["node_features"].shape[1],
                                                                   int(raw["node_labels"].max()) + 1)
        if mode == "as_stored":
            assert torch.equal(d.edge_index, torch.from_numpy(edges).t())
        else:
            pairs = {(int(a), int(b)) for a, b in edges} | {(int(b), int(a)) for a, b in edges}
            assert d.num_edges == len(pairs) and d.is_undirected()
        for s in ("train", "val", "test"):  # split 3 is column 3 of the stored masks
            assert torch.equal(getattr(d, f"{s}_mask"), torch.from_numpy(raw[f"{s}_masks"][3]))
        assert torch.equal(d.x, torch.from_numpy(raw["node_features"]))
    default = zd.load(name, root=root)
    assert ("edges as stored" in default.preprocessing[0]) == directed, "_directed files keep their direction"
    assert default.metric == ("rocauc" if npz in ("minesweeper", "tolokers") else "accuracy")


def test_cornell_npz_is_not_pyg_webkb_cornell(root):
    """The README's figures: 183 nodes, 277 pairs stored once, class counts 38/16/30/82/17."""
    _need("cornell")
    task = zd.load("cornell_npz", root=root, edges="as_stored", split=1)
    assert task.data.num_edges == 277
    assert torch.bincount(task.data.y).tolist() == [38, 16, 30, 82, 17]
    assert task.split_sizes() == {"train": 87, "val": 59, "test": 37}


def test_minesweeper_matches_pygs_own_class(root, tmp_path):
    """The default (undirected) form is exactly what PyG's HeterophilousGraphDataset gives."""
    _need("minesweeper")
    import shutil

    from torch_geometric.datasets import HeterophilousGraphDataset

    pyg_root = tmp_path / "pyg"
    (pyg_root / "minesweeper" / "raw").mkdir(parents=True)
    shutil.copyfile(npz_path("minesweeper"), pyg_root / "minesweeper" / "raw" / "minesweeper.npz")
    ref = HeterophilousGraphDataset(str(pyg_root), "minesweeper")[0]
    d = zd.load("minesweeper", root=root).data
    assert torch.equal(d.edge_index, ref.edge_index) and torch.equal(d.x, ref.x) and torch.equal(d.y, ref.y)
    assert torch.equal(d.train_mask, ref.train_mask[:, 0])


def test_rocauc_scoring_on_minesweeper(root):
    _need("minesweeper")
    task = zd.load("minesweeper", root=root)
    y = task.data.y[task.data.test_mask]
    assert task.evaluate(torch.nn.functional.one_hot(y, 2).float(), y) == 1.0


def test_listed_and_bad_edges_mode_explained():
    names = {r["name"] for r in zd.list_datasets()}
    assert {"minesweeper", "tolokers", "cornell_npz", "chameleon_filtered", "squirrel_filtered_directed"} <= names
    with pytest.raises(ValueError, match="unknown edges mode 'symmetric'.*as_stored.*undirected"):
        zd.load("cornell_npz", edges="symmetric")
