"""Named transforms on small hand-made graphs and through ``load``."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo.datasets as zd
from zoo.datasets.transforms import make_transform


def small_graph() -> Data:
    # 0->1, 1->2, duplicate 0->1, self-loop 2->2; node 3 isolated
    ei = torch.tensor([[0, 1, 0, 2], [1, 2, 1, 2]])
    x = torch.arange(12, dtype=torch.float).view(4, 3) + 1
    return Data(x=x, edge_index=ei, y=torch.tensor([0, 1, 0, 1]),
                train_mask=torch.tensor([True, False, False, False]),
                val_mask=torch.tensor([False, True, False, False]),
                test_mask=torch.tensor([False, False, True, True]))


def apply(name, data, **kw):
    t, _ = make_transform((name, kw) if kw else name, seed=0)
    out = t(data)
    return out, t.describe()


def test_edge_transforms():
    g = small_graph()
    assert apply("dedupe_edges", g)[0].num_edges == 3
    assert not apply("no_self_loops", g)[0].has_self_loops()
    und = apply("undirected", g)[0]
    assert und.is_undirected() and und.num_edges == 5  # {0-1, 1-2} both ways + self-loop
    two = apply("two_hop", apply("undirected", g)[0])[0]
    assert (two.edge_index.t() == torch.tensor([0, 2])).all(1).any()  # 0 reaches 2 in two hops
    bare = apply("no_edges", g)[0]
    assert bare.num_edges == 0 and bare.num_nodes == 4 and torch.equal(bare.x, g.x) and g.num_edges == 4
    iso = apply("remove_isolated", g)[0]
    assert iso.num_nodes == 3 and iso.test_mask.sum() == 1 and torch.equal(iso.x, g.x[:3])


def test_feature_transforms():
    g = small_graph()
    norm = apply("normalize_features", g)[0]
    assert torch.allclose(norm.x.sum(1), torch.ones(4))
    deg, desc = apply("degree_onehot", g)
    assert deg.x.shape == (4, 3) and desc == "degree_onehot(max_degree=2, cat=False)"
    assert deg.x.argmax(1).tolist() == [0, 2, 2, 0]  # in-degrees


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_missing_features_only_touches_unlabelled(p):
    g = small_graph()
    out, desc = apply("missing_features", g, p=p)
    assert torch.equal(out.x[g.train_mask], g.x[g.train_mask])           # labelled nodes keep features
    removed = (out.x == 0).all(1)
    assert int(removed.sum()) == round(p * 3) and not (removed & g.train_mask).any()
    assert torch.equal(out.missing_mask, removed)
    assert desc == f"missing_features(p={p}, seed=0)"
    assert torch.equal(g.x, small_graph().x), "the input must not be modified"


def test_missing_features_on_graph_lists():
    task = zd.load("twin", k=3, transforms=[("missing_features", {"p": 1.0})])
    assert all(g.x.any() for g in task.graphs["train"])            # every training node is labelled
    assert all(not g.x.any() for g in task.graphs["test"])         # test nodes are unlabelled
    assert task.preprocessing[-1] == "missing_features(p=1.0, seed=0)"


def test_transform_specs_through_load():
    task = zd.load("twin", k=3, transforms=["degree_onehot", lambda d: d])
    assert task.num_features == 6  # complete graph on 6 nodes: degree 5 -> 6 one-hot slots
    assert task.preprocessing[1] == "degree_onehot(max_degree=5, cat=False)"
    bare = zd.load("twin", k=3, transforms="normalize_features")
    assert bare.preprocessing[-1] == "normalize_features"
    with pytest.raises(ValueError, match="unknown transform 'normalise_features'.*normalize_features"):
        zd.load("twin", transforms=["normalise_features"])
    with pytest.raises(TypeError, match="'q'.*Valid options: p, seed"):
        zd.load("twin", transforms=[("missing_features", {"q": 1})])
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        zd.load("twin", transforms=[("missing_features", {"p": 2})])


def test_task_evaluate_metrics():
    task = zd.Task(name="t", kind="inductive", metric="micro_f1", num_features=1, num_classes=3,
                   multilabel=True, graphs={"train": [], "val": [], "test": []})
    y = torch.tensor([[1, 0, 1], [0, 1, 0]])
    assert task.evaluate(y * 2.0 - 1, y) == 1.0
    assert task.evaluate(torch.tensor([[1.0, -1, -1], [-1, 1, -1]]), y) == pytest.approx(0.8)
    acc = zd.Task(name="a", kind="transductive", metric="accuracy", num_features=1, num_classes=2,
                  multilabel=False, data=small_graph())
    assert acc.evaluate(torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([1, 1])) == 0.5
    assert acc.describe()["split_sizes"] == {"train": 1, "val": 1, "test": 2}
