"""The OGB path, round-tripped on small datasets written in OGB's own format (ogb.io.DatasetSaver).

The real ogbn-arxiv / ogbn-proteins / ogbg-molhiv files are not in the offline mirror, so
these tests save small look-alikes (same task type, number of tasks and metric, hence the
same official Evaluator) into a temporary mirror and load them through ``zoo.datasets.load``.
"""
from __future__ import annotations

import hashlib
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
        assert torch.equal(g.x, torch.from_numpy(graphs[i]["node_feat"]).float())
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
