"""GATE's synthetic test bed: seeded, the authors' settings, self-sufficient labels in the node's
own features, neighbour-dependent labels from the random attention network's output."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo.datasets.gate_synthetic import _attention_layer, erdos_renyi


def load(**kw):
    return zoo.datasets.load("gate_synthetic", **kw).data


def test_seeded_and_sized_as_the_settings():
    a, b, c = load(setting=22, seed=3), load(setting=22, seed=3), load(setting=22, seed=4)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.y, b.y) and torch.equal(a.x, b.x)
    assert not torch.equal(a.x, c.x)
    assert a.num_nodes == 1000 and a.x.shape == (1000, 2) and set(a.y.tolist()) == {0, 1}
    assert [int(a[m].sum()) for m in ("train_mask", "val_mask", "test_mask")] == [500, 250, 250]
    assert not (a.train_mask & a.val_mask).any() and bool((a.train_mask | a.val_mask | a.test_mask).all())


@pytest.mark.parametrize("setting, classes", [(26, 2), (27, 8)])
def test_self_sufficient_features_are_the_label(setting, classes):
    d = load(setting=setting, seed=0, num_nodes=300)
    assert d.x.shape == (300, classes)
    assert torch.equal(d.x.argmax(1), d.y) and torch.equal(d.x.sum(1), torch.ones(300))


def test_erdos_renyi_is_simple_undirected_with_density_p():
    e = erdos_renyi(400, 0.05, torch.Generator().manual_seed(0))
    assert not (e[0] == e[1]).any()
    pairs = set(map(tuple, e.t().tolist()))
    assert all((v, u) in pairs for u, v in pairs) and len(pairs) == e.size(1)
    assert abs(e.size(1) / (400 * 399) - 0.05) < 0.005


def test_generator_layer_matches_its_equation():
    """h'_v = sum over in-neighbours u != v of softmax_u(a^T ReLU(W h_u + W h_v)) W h_u."""
    ei = torch.tensor([[0, 1, 2, 2, 3], [1, 0, 1, 3, 2]])
    x = torch.randn(5, 2)
    out = _attention_layer(x, ei, torch.Generator().manual_seed(1))
    g = torch.Generator().manual_seed(1)  # the same draws, in the layer's order
    w = (torch.rand(2, 2, generator=g) * 2 - 1) / 2 ** 0.5
    a = (torch.rand(2, generator=g) * 2 - 1) * (6 / 3) ** 0.5
    h = x @ w.T
    for v in range(5):
        nbrs = [int(u) for u, t in ei.t().tolist() if t == v]
        if not nbrs:
            assert torch.equal(out[v], torch.zeros(2))  # an isolated node aggregates nothing
            continue
        alpha = torch.softmax(torch.stack([torch.relu(h[u] + h[v]) @ a for u in nbrs]), 0)
        torch.testing.assert_close(out[v], (alpha.unsqueeze(1) * h[nbrs]).sum(0))


def test_neighbour_dependent_labels_are_not_a_function_of_own_features():
    """With 3 aggregation steps, nodes whose own features are nearly equal still get both labels."""
    d = load(setting=23, seed=0)
    order = d.x[:, 0].argsort()
    near = d.y[order][:200]  # the 200 nodes with the smallest first feature
    assert 0 < int(near.sum()) < 200


def test_bad_setting_is_one_line():
    with pytest.raises(ValueError, match="setting must be one of"):
        load(setting=20)
