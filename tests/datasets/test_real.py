"""Mirrored PyG datasets load offline with their known statistics and valid splits.

Expected numbers come from the mirror's README (PyG's own figures) and the balance paper's
Table 8, not from zoo's code. Datasets absent from the mirror are skipped with the reason.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

import zoo.datasets as zd
from zoo.datasets import mirror

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MIRROR = (REPO / ".." / "shared" / "datasets").resolve()

# name -> nodes, edges (PyG num_edges), features, classes, (train, val, test) of the standard split
KNOWN = {
    "cora": (2708, 10556, 1433, 7, (140, 500, 1000)),
    "citeseer": (3327, 9104, 3703, 6, (120, 500, 1000)),
    "pubmed": (19717, 88648, 500, 3, (60, 500, 1000)),
    "cornell": (183, 298, 1703, 5, (87, 59, 37)),
    "texas": (183, 325, 1703, 5, (87, 59, 37)),
    "wisconsin": (251, 515, 1703, 5, (120, 80, 51)),
    "chameleon": (2277, 36101, 2325, 5, (1092, 729, 456)),
    "squirrel": (5201, 217073, 2089, 5, (2496, 1664, 1041)),
    "actor": (7600, 30019, 932, 5, (3648, 2432, 1520)),
    "amazon_computers": (13752, 491722, 767, 10, None),
    "amazon_photo": (7650, 238162, 745, 8, None),
    "coauthor_cs": (18333, 163788, 6805, 15, None),
    "coauthor_physics": (34493, 495924, 8415, 5, None),
    "cora_full": (19793, 126842, 8710, 70, None),
}
SLOW = {"pubmed", "squirrel", "amazon_computers", "amazon_photo", "coauthor_cs", "coauthor_physics", "cora_full"}
HETERO = ["cornell", "texas", "wisconsin", "chameleon", "squirrel", "actor"]
# Balance paper Table 8: undirected edges counted once, self-loops excluded.
TABLE8_EDGES = {"cornell": 277, "texas": 279, "wisconsin": 450, "chameleon": 31371, "squirrel": 198353,
                "actor": 26659}


def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in names]


@pytest.fixture(scope="session", autouse=True)
def _mirror_env():
    """Point ZOO_DATA_MIRROR at the repo's sibling mirror unless CI already set it."""
    old = os.environ.get(mirror.MIRROR_ENV)
    if not old:
        os.environ[mirror.MIRROR_ENV] = str(DEFAULT_MIRROR)
    yield
    if not old:
        os.environ.pop(mirror.MIRROR_ENV, None)


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo-data")


def require_mirrored(name: str) -> None:
    spec = zd.get_spec(name)
    missing = mirror.missing_files(Path("/nonexistent"), [f for f in spec.raw_files if not f.endswith("/")])
    if missing or not mirror.mirror_dirs():
        pytest.skip(f"{name} not in mirror ({os.environ.get(mirror.MIRROR_ENV)!r}): missing {missing[:3]}")


_CACHE: dict = {}


def cached_load(root: Path, name: str, **kw):
    """Session cache: each (dataset, options) is loaded once."""
    key = (str(root), name, tuple(sorted(kw.items())))
    if key not in _CACHE:
        require_mirrored(name)
        _CACHE[key] = zd.load(name, root=root, download=False, **kw)
    return _CACHE[key]


def assert_valid_split(data) -> None:
    masks = [data.train_mask, data.val_mask, data.test_mask]
    for m in masks:
        assert m.dtype == torch.bool and m.dim() == 1 and m.numel() == data.num_nodes
        assert int(m.sum()) > 0, "empty split part"
    assert not (masks[0] & masks[1]).any() and not (masks[0] & masks[2]).any() and not (masks[1] & masks[2]).any()


@pytest.mark.parametrize("name", _params(KNOWN))
def test_known_statistics(data_root, name):
    nodes, edges, features, classes, sizes = KNOWN[name]
    task = cached_load(data_root, name)
    assert (task.data.num_nodes, task.data.num_edges, task.num_features, task.num_classes) == (
        nodes, edges, features, classes)
    assert task.kind == "transductive" and task.metric == "accuracy" and not task.multilabel
    assert_valid_split(task.data)
    if sizes is not None:
        assert tuple(task.split_sizes().values()) == sizes
    else:  # Shchur per-class default: 20 train and 30 val per class
        assert task.split_sizes()["train"] == 20 * classes and task.split_sizes()["val"] == 30 * classes
    assert task.describe()["num_nodes"] == nodes


@pytest.mark.parametrize("name", _params(["cora", "citeseer", "pubmed"] + HETERO))
def test_every_geom_gcn_split_is_disjoint_and_nonempty(data_root, name):
    seen = set()
    for i in range(10):
        task = cached_load(data_root, name, split=i)
        assert task.split == i
        assert_valid_split(task.data)
        seen.add(tuple(task.data.train_mask.nonzero().view(-1)[:20].tolist()))
    assert len(seen) == 10, "the 10 Geom-GCN splits should differ"
    with pytest.raises(ValueError, match="out of range"):
        zd.load(name, root=data_root, split=10, download=False)


def test_planetoid_geom_gcn_sizes(data_root):
    assert cached_load(data_root, "cora", split=0).split_sizes() == {"train": 1192, "val": 796, "test": 497}
    assert cached_load(data_root, "citeseer", split=4).split_sizes() == {"train": 1017, "val": 679, "test": 424}


def test_citeseer_remove_isolated(data_root):
    full = cached_load(data_root, "citeseer")
    task = cached_load(data_root, "citeseer", remove_isolated=True)
    assert task.data.num_nodes == 3327 - 48 and task.data.num_edges == 9104
    assert "remove_isolated" in task.preprocessing
    assert_valid_split(task.data)
    assert task.split_sizes()["train"] <= full.split_sizes()["train"]


@pytest.mark.parametrize("name", _params(HETERO))
def test_heterophilic_table8_edge_counts(data_root, name):
    task = cached_load(data_root, name, undirected=True, no_self_loops=True)
    assert task.data.num_edges == 2 * TABLE8_EDGES[name]
    assert task.data.is_undirected() and not task.data.has_self_loops()
    assert task.preprocessing == ("no_self_loops", "undirected")


def test_undirected_counts_match_mirror_readme(data_root):
    assert cached_load(data_root, "cornell", undirected=True).data.num_edges == 557
    assert cached_load(data_root, "actor", undirected=True, dedupe_edges=True).data.num_edges == 53411


@pytest.mark.parametrize("name", _params(["cora", "cornell", "amazon_photo", "coauthor_cs"]))
@pytest.mark.parametrize("split", ["per_class", "ratio"])
def test_random_splits_reproducible_and_seeded(data_root, name, split):
    require_mirrored(name)
    t0 = zd.load(name, root=data_root, split=split, seed=0, download=False)
    t0b = zd.load(name, root=data_root, split=split, seed=0, download=False)
    t1 = zd.load(name, root=data_root, split=split, seed=1, download=False)
    for t in (t0, t1):
        assert_valid_split(t.data)
    for m in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(t0.data, m), getattr(t0b.data, m))
    assert not torch.equal(t0.data.train_mask, t1.data.train_mask)
    n, c = t0.data.num_nodes, t0.num_classes
    if split == "per_class":
        counts = torch.bincount(t0.data.y[t0.data.train_mask], minlength=c)
        class_sizes = torch.bincount(t0.data.y, minlength=c)
        assert torch.equal(counts, class_sizes.clamp(max=20))  # small classes give what they have
        assert t0.split == "random_per_class:seed=0"
    else:
        sizes = t0.split_sizes()
        assert abs(sizes["train"] - 0.6 * n) <= 1 and abs(sizes["val"] - 0.2 * n) <= 1
        assert sizes["train"] + sizes["val"] + sizes["test"] == n


def test_per_class_with_fixed_val_and_test_totals(data_root):
    t = cached_load(data_root, "cora", split="per_class", num_val=500, num_test=1000, seed=3)
    assert t.split_sizes() == {"train": 140, "val": 500, "test": 1000}
    assert_valid_split(t.data)


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_mirror_unchanged_after_loading(tmp_path):
    mirrors = mirror.mirror_dirs()
    if not mirrors or not mirrors[0].is_dir():
        pytest.skip(f"no mirror at {os.environ.get(mirror.MIRROR_ENV)!r}")
    before = {str(m): _snapshot(m) for m in mirrors}
    for name in ("cora", "cornell", "chameleon", "actor"):
        require_mirrored(name)
        zd.load(name, root=tmp_path, download=False)
    zd.load("cora", root=tmp_path, split=2, download=False)
    after = {str(m): _snapshot(m) for m in mirrors}
    assert before == after
    assert (tmp_path / "Cora" / "processed").is_dir(), "PyG should have processed into the data root"


def test_list_datasets_marks_availability(data_root):
    rows = {r["name"]: r for r in zd.list_datasets(data_root)}
    from zoo.datasets.heterophilous_npz import NPZ

    expected = set(KNOWN) | set(NPZ) | {"ppi", "ogbn_arxiv", "ogbn_proteins", "ogbg_molhiv", "trees", "twin",
                                        "arxiv_like", "gate_synthetic"}
    assert set(rows) == expected
    assert rows["twin"]["available"] and rows["twin"]["where"] == "synthetic"
    require_mirrored("cora")
    assert rows["cora"]["available"]
    if (mirror.mirror_dirs()[0] / "heterophilous" / "minesweeper").is_dir():
        assert rows["minesweeper"]["available"] and rows["minesweeper"]["metric"] == "rocauc"
    if not any((m / "ogb" / "ogbn_proteins").is_dir() for m in mirror.mirror_dirs()):
        assert not rows["ogbn_proteins"]["available"] and rows["ogbn_proteins"]["where"] == "missing"
    table = zd.format_datasets_table(list(rows.values()))
    assert all(n in table for n in expected)
