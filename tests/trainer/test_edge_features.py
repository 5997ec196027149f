"""edge_attr of a node task flows through the trainer into a model with an edge encoder."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.datasets import Task


def _task(edge_attr=True):
    g = torch.Generator().manual_seed(0)
    n, e = 40, 160
    data = Data(x=torch.randn(n, 5, generator=g), edge_index=torch.randint(0, n, (2, e), generator=g),
                y=torch.arange(n) % 3)
    if edge_attr:
        data.edge_attr = torch.randn(e, 4, generator=g)
    return Task.from_data(data, split=(0.5, 0.25))


def test_a_linear_edge_encoder_trains_on_the_tasks_edge_features():
    task = _task()
    history = zoo.fit("gatv2", task, edge_encoder="linear", edge_dim=4, num_layers=2, hidden_dim=8, epochs=3,
                      dtype="float64")
    model, d = history.model(0), task.data
    with torch.no_grad():
        pred = model(d.edge_index, d.x.double(), edge_attr=d.edge_attr).argmax(-1)
    accuracy = float((pred[d.test_mask] == d.y[d.test_mask]).double().mean())
    assert accuracy == pytest.approx(history.final[0]["test"], abs=1e-12)  # scored with the edge features


def test_an_edge_encoder_without_edge_features_is_one_line():
    with pytest.raises(ValueError, match="the model has an edge encoder but the graph has no edge_attr"):
        zoo.fit("gatv2", _task(edge_attr=False), edge_encoder="linear", edge_dim=4, num_layers=2, epochs=1)
