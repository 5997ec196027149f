"""One paper's options are plugins registered by zoo.papers, not branches of the generic DeepGNN."""
from __future__ import annotations

import inspect

import pytest
import torch

import zoo
import zoo.nn.base
from zoo.nn.encoders import INPUT_ENCODERS
from zoo.nn.heads import CLASSIFIERS, make_classifier, register_classifier
from zoo.papers import lipschitz


def test_the_lipschitz_authors_pieces_are_registered_by_zoo_papers():
    assert INPUT_ENCODERS.get("affine") is lipschitz.affine_encoder
    assert CLASSIFIERS.get("linear") is lipschitz.linear_classifier
    source = inspect.getsource(zoo.nn.base)
    assert "nn.Linear(hidden_dim, out_dim)" not in source and 'classifier == "linear"' not in source


def test_a_registered_head_is_used_by_every_family():
    @register_classifier("test_two_layer_head")
    def head(in_dim, out_dim):
        return torch.nn.Sequential(torch.nn.Linear(in_dim, 3), torch.nn.Linear(3, out_dim))

    try:
        model = zoo.build("gcn", in_dim=5, out_dim=4, hidden_dim=6, num_layers=2, classifier="test_two_layer_head")
        assert isinstance(model.classifier, torch.nn.Sequential) and model.layers[-1].concat
        assert model(torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 5)).shape == (2, 4)
    finally:
        CLASSIFIERS._items.pop("test_two_layer_head")


def test_unknown_head_lists_the_registered_ones():
    with pytest.raises(ValueError, match="linear"):
        make_classifier("lineer", 4, 2)
    assert make_classifier("none", 4, 2) is None
