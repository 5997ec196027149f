"""twin (Oxford report §4.5): the text's reading (default) and the authors' code's reading as options.

The code (github samuelbarrett1234/atml-group-11, kally/src/theoretical/construct_dataset.py,
``kn_artificial``) gives second-group nodes their index as well as their label, and trains on
every permutation once; the text gives them only the label and does not state the graphs.
"""
from __future__ import annotations

import math

import pytest
import torch

import zoo.datasets as zd


def _twin_of_by_features(x: torch.Tensor, k: int, i: int) -> list:
    """Second-group nodes whose first half equals first-group node ``i``'s: what a feature-based
    (dynamic) attention can use to find the twin."""
    return [k + j for j in range(k) if torch.equal(x[k + j, :k], x[i, :k])]


@pytest.mark.parametrize("k", [3, 5])
def test_text_features_hide_the_twin(k):
    """§4.5.1: second-group features are ``[0 | one_hot(label)]``: no feature names the twin."""
    for g in zd.load("twin", k=k, seed=1).graphs["train"]:
        assert not g.x[k:, :k].any()
        assert all(_twin_of_by_features(g.x, k, i) == [] for i in range(k))


@pytest.mark.parametrize("k", [3, 5])
def test_code_features_show_index_and_label(k):
    task = zd.load("twin", k=k, seed=1, features="code")
    text = zd.load("twin", k=k, seed=1)
    for split, graphs in task.graphs.items():
        for g, t in zip(graphs, text.graphs[split]):
            assert torch.equal(g.y, t.y) and torch.equal(g.edge_index, t.edge_index)  # same graphs
            assert torch.equal(g.x[:k], t.x[:k])                                   # first group as the text
            assert torch.equal(g.x[k:, :k], torch.eye(k))                          # + the index
            assert torch.equal(g.x[k:, k:], t.x[k:, k:])                           # + the label
            for i in range(k):
                assert _twin_of_by_features(g.x, k, i) == [k + i]
                assert int(g.x[k + i, k:].argmax()) == int(g.y[i])
    assert "features=code" in task.preprocessing[0]


@pytest.mark.parametrize("k", [3, 4])
def test_all_permutations_trains_on_each_permutation_once(k):
    task = zd.load("twin", k=k, seed=2, all_permutations=True, num_train=3)
    perms = [tuple(g.y[:k].tolist()) for g in task.graphs["train"]]
    assert len(perms) == math.factorial(k) == len(set(perms))                 # num_train is not used
    again = [tuple(g.y[:k].tolist()) for g in zd.load("twin", k=k, seed=2, all_permutations=True,
                                                         num_train=3).graphs["train"]]
    other = [tuple(g.y[:k].tolist()) for g in zd.load("twin", k=k, seed=3, all_permutations=True,
                                                         num_train=3).graphs["train"]]
    assert again == perms and other != perms and sorted(other) == sorted(perms)  # a seeded order
    default = zd.load("twin", k=k, seed=2, num_train=3)
    for split in ("val", "test"):  # held-out graphs are those of the default reading
        assert [g.y.tolist() for g in task.graphs[split]] == [g.y.tolist() for g in default.graphs[split]]
    assert "all_permutations=True" in task.preprocessing[0]


def test_twin_default_is_unchanged_by_the_options():
    a = zd.load("twin", k=4, seed=0)
    b = zd.load("twin", k=4, seed=0, features="text", all_permutations=False)
    assert all(torch.equal(x.x, y.x) and torch.equal(x.y, y.y) for x, y in zip(a.graphs["train"], b.graphs["train"]))
    assert a.preprocessing == b.preprocessing == ("twin(k=4, self_loops=False, seed=0)",)


def test_twin_option_errors_name_the_fix():
    with pytest.raises(ValueError, match="Did you mean 'code'"):
        zd.load("twin", k=3, features="cod")
    with pytest.raises(ValueError, match="362,880"):
        zd.load("twin", k=9, all_permutations=True)


@pytest.mark.parametrize("model", ["gat", "gatv2"])
def test_text_data_gives_feature_attention_one_answer_per_index(model):
    """Why GAT and GATv2 cannot fit the text's twin data (the ceiling in oxford_fig1.toml): every
    graph holds the same feature vectors, so a layer attending by features gives first-group node
    i the same output in every graph; with the code's features the twin is visible and it does not."""
    import zoo

    torch.manual_seed(0)
    net = zoo.build(model, in_dim=8, out_dim=4, num_layers=1).double()
    for features, same in (("text", True), ("code", False)):
        graphs = zd.load("twin", k=4, seed=0, num_train=6, features=features).graphs["train"]
        outs = [net(g.edge_index, g.x.double())[:4] for g in graphs]
        assert all(torch.allclose(o, outs[0], atol=1e-12) for o in outs) == same, features
