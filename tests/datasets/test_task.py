"""A Task: its evaluation refuses non-finite predictions; its repr is a summary."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from zoo.datasets.task import Task


def _task(metric="accuracy", **kw):
    data = Data(x=torch.randn(3, 2), edge_index=torch.tensor([[0], [1]]), y=torch.tensor([0, 1, 0]))
    data.train_mask, data.val_mask, data.test_mask = torch.eye(3, dtype=torch.bool)  # a task is made with its splits
    return Task(name="toy", kind="transductive", metric=metric, num_features=2, num_classes=2,
                multilabel=False, data=data, **kw)

@pytest.mark.parametrize("metric", ["accuracy", "rocauc", "micro_f1"])
def test_evaluate_refuses_non_finite_predictions(metric):
    task = _task(metric)
    logits = torch.tensor([[1.0, 0.0], [float("nan"), 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="predictions contain 1 NaN/inf"):
        task.evaluate(logits, torch.tensor([0, 1, 0]))

def test_task_repr_is_a_summary():
    graphs = {"train": [Data(x=torch.randn(2, 1), edge_index=torch.tensor([[0], [1]]))] * 5000, "valid": [], "test": []}
    task = Task(name="toy", kind="graph", metric="rocauc", num_features=1, num_classes=1, multilabel=False,
                graphs=graphs)
    text = repr(task)
    assert len(text) < 400 and "train: 5000" in text and "Data(" not in text
    assert "3 nodes, 1 edges" in repr(_task())
