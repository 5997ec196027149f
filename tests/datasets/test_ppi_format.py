"""The PPI loader, run through PyG's PPI class on a tiny dataset written in PPI's raw format.

The real PPI files are not in the mirror; this exercises the same code path (mirror copy,
PyG processing, inductive Task, micro-F1) on generated graphs.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from zoo.datasets import load

networkx = pytest.importorskip("networkx", reason="PyG's PPI class needs networkx to read its raw graphs")


def write_ppi_raw(raw, graphs_per_split=(3, 1, 1), nodes=6, features=50, labels=121, seed=0):
    rng = np.random.default_rng(seed)
    raw.mkdir(parents=True)
    for split, count in zip(("train", "valid", "test"), graphs_per_split):
        n = nodes * count
        graph = networkx.DiGraph()
        graph.add_nodes_from(range(n))
        for g in range(count):  # a directed cycle in both directions inside each graph
            for i in range(nodes):
                u, v = g * nodes + i, g * nodes + (i + 1) % nodes
                graph.add_edge(u, v)
                graph.add_edge(v, u)
        with open(raw / f"{split}_graph.json", "w") as fh:
            json.dump(networkx.readwrite.json_graph.node_link_data(graph, edges="links"), fh)
        np.save(raw / f"{split}_feats.npy", rng.normal(size=(n, features)).astype(np.float32))
        np.save(raw / f"{split}_labels.npy", rng.integers(0, 2, size=(n, labels)).astype(np.float32))
        np.save(raw / f"{split}_graph_id.npy", np.repeat(np.arange(count) + 1, nodes))


def test_ppi_loads_from_a_mirror_as_an_inductive_multilabel_task(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    write_ppi_raw(mirror / "PPI" / "raw")
    monkeypatch.setenv("ZOO_DATA_MIRROR", str(mirror))
    task = load("ppi", root=tmp_path / "root")
    assert (task.kind, task.metric, task.multilabel) == ("inductive", "micro_f1", True)
    assert task.num_features == 50 and task.num_classes == 121
    assert [len(task.graphs[s]) for s in ("train", "val", "test")] == [3, 1, 1]
    g = task.graphs["train"][0]
    assert g.num_nodes == 6 and g.edge_index.size(1) == 12
    y = task.graphs["test"][0].y
    assert task.evaluate(y * 20 - 10, y) == pytest.approx(1.0)   # perfect logits
    assert task.evaluate(-(y * 20 - 10), y) == pytest.approx(0.0)  # every label wrong
    assert not any((mirror / "PPI").rglob("processed")), "the mirror must never be written"
