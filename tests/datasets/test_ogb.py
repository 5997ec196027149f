"""The OGB path, round-tripped on small datasets written in OGB's own format (ogb.io.DatasetSaver).

The real ogbn-arxiv / ogbn-proteins / ogbg-molhiv files are not in the offline mirror, so
these tests save small look-alikes (same task type, number of tasks and metric, hence the
same official Evaluator) into a temporary mirror and load them through ``zoo.datasets.load``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo.datasets as zd
from zoo.datasets import mirror


def _save(tmp: Path, name: str, graphs, labels, split, task_type, metric, num_classes):
    from ogb.io import DatasetSaver

    saver = DatasetSaver(dataset_name=name, is_hetero=False, version=1, root=str(tmp / "saver"))
    saver.save_graph_list(graphs)
    saver.save_target_labels(labels)
    saver.save_task_info(task_type=task_type, eval_metric=metric, num_classes=num_classes)
    saver.save_split(split, split_name="random" if name.startswith("ogbn") else "scaffold")
    mapping = tmp / "mapping"
    mapping.mkdir(exist_ok=True)
    (mapping / "README.md").write_text("toy mapping\n")
    saver.copy_mapping_dir(str(mapping))
    meta = saver.get_meta_dict()
    fake_mirror = tmp / "mirror"
    shutil.copytree(saver.dataset_dir, fake_mirror / "ogb" / "_".join(name.split("-")))
    return meta, fake_mirror


def _hashes(folder: Path) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def _split(n: int, rng) -> dict:
    perm = rng.permutation(n)
    a, b = int(0.6 * n), int(0.8 * n)
    return {"train": perm[:a], "valid": perm[a:b], "test": perm[b:]}


def test_ogbg_molhiv_roundtrip_and_evaluator(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    graphs, n_graphs = [], 40
    for _ in range(n_graphs):
        n = int(rng.integers(3, 8))
        src = np.arange(n - 1)
        ei = np.concatenate([np.stack([src, src + 1]), np.stack([src + 1, src])], axis=1).astype(np.int64)
        graphs.append({"edge_index": ei, "num_nodes": n, "node_feat": rng.integers(0, 5, (n, 9)).astype(np.int64),
                       "edge_feat": rng.integers(0, 3, (ei.shape[1], 3)).astype(np.int64)})
    labels = (np.arange(n_graphs) % 2).reshape(-1, 1).astype(np.int64)
    split = _split(n_graphs, rng)
    meta, fake = _save(tmp_path, "ogbg-molhiv", graphs, labels, split, "binary classification", "rocauc", 2)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(fake))
    before = _hashes(fake)

    task = zd.load("ogbg_molhiv", root=tmp_path / "root", meta_dict=meta, download=False)
    assert _hashes(fake) == before, "the mirror must not be written"
    assert (task.kind, task.metric, task.num_features, task.num_classes) == ("graph", "rocauc", 9, 1)
    assert {k: len(v) for k, v in task.graphs.items()} == {"train": 24, "val": 8, "test": 8}
    test_graphs = task.graphs["test"]
    for g, i in zip(test_graphs, split["test"]):  # graphs come back in split order, features intact
        assert g.num_nodes == graphs[i]["num_nodes"]
        assert g.x.dtype == torch.int64 and torch.equal(g.x, torch.from_numpy(graphs[i]["node_feat"]))
        assert g.edge_attr.dtype == torch.int64  # category codes for ogb's AtomEncoder / BondEncoder
        assert int(g.y) == int(labels[i, 0])
    y = torch.cat([g.y for g in test_graphs])
    assert task.evaluate(y.float(), y) == 1.0
    assert task.evaluate(-y.float(), y) == 0.0
    two_class_logits = torch.cat([torch.zeros_like(y), y], dim=1).float()
    assert task.evaluate(two_class_logits, y) == 1.0
    from ogb.graphproppred import Evaluator

    scores = torch.randn(len(y), 1)
    expected = Evaluator("ogbg-molhiv").eval({"y_true": y, "y_pred": scores})["rocauc"]
    assert task.evaluate(scores, y) == pytest.approx(expected)


def test_ogbn_proteins_roundtrip_multilabel_rocauc(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    n, e = 60, 240
    ei = rng.integers(0, n, (2, e)).astype(np.int64)
    graph = {"edge_index": ei, "num_nodes": n, "edge_feat": rng.random((e, 8)).astype(np.float32)}
    labels = rng.integers(0, 2, (n, 112)).astype(np.int64)
    split = _split(n, rng)
    meta, fake = _save(tmp_path, "ogbn-proteins", [graph], labels, split, "binary classification", "rocauc", 2)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(fake))

    task = zd.load("ogbn_proteins", root=tmp_path / "root", meta_dict=meta, download=False)
    d = task.data
    assert (task.kind, task.metric, task.multilabel, task.num_classes, task.num_features) == (
        "transductive", "rocauc", True, 112, 8)
    assert task.split_sizes() == {"train": 36, "val": 12, "test": 12}
    assert torch.equal(d.test_mask.nonzero().view(-1), torch.from_numpy(np.sort(split["test"])))
    # node features: the mean of incoming edge features
    dst0 = int(ei[1, 0])
    incoming = graph["edge_feat"][ei[1] == dst0].mean(0)
    assert torch.allclose(d.x[dst0], torch.from_numpy(incoming), atol=1e-6)
    y = d.y[d.test_mask]
    assert task.evaluate(y * 2 - 1, y) == 1.0
    assert 0.0 <= task.evaluate(torch.randn_like(y), y) <= 1.0


def test_ogbn_arxiv_roundtrip_accuracy(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    n = 50
    ei = rng.integers(0, n, (2, 150)).astype(np.int64)
    graph = {"edge_index": ei, "num_nodes": n, "node_feat": rng.random((n, 128)).astype(np.float32)}
    labels = rng.integers(0, 40, (n, 1)).astype(np.int64)
    meta, fake = _save(tmp_path, "ogbn-arxiv", [graph], labels, _split(n, rng), "multiclass classification",
                       "acc", 40)
    monkeypatch.setenv(mirror.MIRROR_ENV, str(fake))

    task = zd.load("ogbn_arxiv", root=tmp_path / "root", meta_dict=meta, undirected=True, download=False)
    d = task.data
    assert (d.num_nodes, task.num_features, task.num_classes, task.metric) == (n, 128, 40, "accuracy")
    assert d.is_undirected() and task.preprocessing == ("undirected",)
    y = d.y[d.val_mask]
    logits = torch.nn.functional.one_hot(y, 40).float()
    assert task.evaluate(logits, y) == 1.0
    logits[0] = logits[0].roll(1)
    assert task.evaluate(logits, y) == pytest.approx(1 - 1 / len(y))


def test_missing_ogb_data_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv(mirror.MIRROR_ENV, str(tmp_path / "empty"))
    with pytest.raises(zd.MissingDataError, match=r"ogbn_arxiv.*ogb/ogbn_arxiv/raw/node-feat\.csv\.gz"):
        zd.load("ogbn_arxiv", root=tmp_path / "root", download=False)


def _write_arxiv_release(folder: Path, n: int, rng) -> dict:
    """The file set OGB's ``arxiv.zip`` unpacks to (csv.gz, time split), tiny."""
    import pandas as pd

    ei = rng.integers(0, n, (120, 2))
    ei = ei[ei[:, 0] != ei[:, 1]]
    tables = {
        "raw/edge.csv.gz": ei, "raw/node-feat.csv.gz": rng.random((n, 128)).astype(np.float32),
        "raw/node-label.csv.gz": rng.integers(0, 40, (n, 1)), "raw/node_year.csv.gz": rng.integers(2000, 2020, (n, 1)),
        "raw/num-node-list.csv.gz": np.array([[n]]), "raw/num-edge-list.csv.gz": np.array([[len(ei)]]),
    }
    perm = rng.permutation(n)
    split = {"train": np.sort(perm[:30]), "valid": np.sort(perm[30:40]), "test": np.sort(perm[40:])}
    for k, v in split.items():
        tables[f"split/time/{k}.csv.gz"] = v.reshape(-1, 1)
    for rel, arr in tables.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(arr).to_csv(folder / rel, header=False, index=False, compression="gzip")
    (folder / "RELEASE_v1.txt").write_text("ogbn-arxiv v1\n")
    (folder / "mapping").mkdir()
    (folder / "mapping" / "README.md").write_text("toy\n")
    return {"edges": ei, "split": split, "feat": tables["raw/node-feat.csv.gz"]}


def test_downloaded_ogbn_arxiv_copy_loads_from_a_mirror(tmp_path, monkeypatch):
    """A downloaded copy (OGB's own layout under <mirror>/ogb/ogbn_arxiv) loads without meta_dict."""
    rng = np.random.default_rng(3)
    n = 50
    mirror_dir = tmp_path / "downloads"
    written = _write_arxiv_release(mirror_dir / "ogb" / "ogbn_arxiv", n, rng)
    (mirror_dir / "ogb" / "ogbn_arxiv" / "processed").mkdir()  # a foreign processed cache is never copied
    (mirror_dir / "ogb" / "ogbn_arxiv" / "processed" / "geometric_data_processed.pt").write_bytes(b"junk")
    monkeypatch.setenv(mirror.MIRROR_ENV, str(mirror_dir))
    spec = zd.get_spec("ogbn_arxiv")
    for k, v in {"nodes": n, "edges": len(written["edges"]), "features": 128, "classes": 40}.items():
        monkeypatch.setitem(spec.stats, k, v)  # the toy copy's statistics (the real ones: 169343 ...)
    task = zd.load("ogbn_arxiv", root=tmp_path / "root", download=False)
    d = task.data
    assert (d.num_nodes, d.num_edges, task.num_classes) == (n, len(written["edges"]), 40)
    assert torch.equal(d.edge_index, torch.from_numpy(written["edges"].T))
    assert torch.allclose(d.x, torch.from_numpy(written["feat"]))
    assert torch.equal(d.test_mask.nonzero().view(-1), torch.from_numpy(written["split"]["test"]))
    monkeypatch.setitem(spec.stats, "nodes", 169343)  # the real statistics: the toy copy is refused
    import zoo.datasets.cache as cache

    with pytest.warns(RuntimeWarning, match="nodes 50 \\(expected 169343\\)"):
        with pytest.raises(cache.DataIntegrityError, match="ogbn_arxiv.*nodes 50 \\(expected 169343\\)"):
            zd.load("ogbn_arxiv", root=tmp_path / "root", download=False)


REAL_MIRROR = Path(os.environ.get(mirror.MIRROR_ENV, "").split(os.pathsep)[0]
                   or Path(__file__).resolve().parents[3] / "shared" / "datasets")


@pytest.mark.slow
def test_real_ogbg_molhiv_from_the_mirror(tmp_path, monkeypatch):
    """The real ogbg-molhiv (mirror): int64 features, scaffold split 32901/4113/4113, OGB's Evaluator."""
    if not (REAL_MIRROR / "ogb" / "ogbg_molhiv" / "RELEASE_v1.txt").is_file():
        pytest.skip(f"ogbg-molhiv not in the mirror {REAL_MIRROR}")
    monkeypatch.setenv(mirror.MIRROR_ENV, str(REAL_MIRROR))
    task = zd.load("ogbg_molhiv", root=tmp_path / "root", download=False)
    assert task.split_sizes() == {"train": 32901, "val": 4113, "test": 4113}
    assert (task.kind, task.metric, task.num_features, task.num_classes) == ("graph", "rocauc", 9, 1)
    g = task.graphs["train"][0]
    assert g.x.dtype == torch.int64 and g.x.size(1) == 9 and g.edge_attr.dtype == torch.int64
    assert g.edge_attr.size(1) == 3 and g.y.shape == (1, 1)
    y = torch.cat([h.y for h in task.graphs["test"]])
    assert 0 < int(y.sum()) < len(y)
    from ogb.graphproppred import Evaluator

    scores = torch.randn(len(y), 1)
    assert task.evaluate(scores, y) == pytest.approx(
        Evaluator("ogbg-molhiv").eval({"y_true": y, "y_pred": scores})["rocauc"])
    again = zd.load("ogbg_molhiv", root=tmp_path / "root", download=False)  # verified cache reused
    assert torch.equal(again.graphs["test"][5].x, task.graphs["test"][5].x)
