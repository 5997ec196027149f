"""Labels and masks are checked when a task is made: one line per problem, per split."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from zoo.datasets import Task


def _data(n=30, classes=3):
    data = Data(x=torch.randn(n, 4), edge_index=torch.randint(0, n, (2, 60)), y=torch.arange(n) % classes)
    data.train_mask, data.val_mask, data.test_mask = (torch.arange(n) % 3 == k for k in range(3))
    return data


def _task(data, classes=3, **kw):
    return Task(name="g", kind="transductive", metric="accuracy", num_features=4, num_classes=classes,
                multilabel=False, data=data, **kw)


@pytest.mark.parametrize("split", ["train", "val", "test"])
@pytest.mark.parametrize("label", [-1, 3, 7])
def test_a_label_outside_the_classes_is_refused_per_split(split, label):
    data = _data()
    data.y[getattr(data, f"{split}_mask").nonzero()[0]] = label
    with pytest.raises(ValueError, match=rf"^g: 1 {split} label\(s\) outside \[0, 3\) \(e.g. {label}\)"):
        _task(data)


def test_labels_outside_every_split_are_not_checked():
    data = _data()
    data.train_mask[0] = False
    data.y[0] = -1  # an unlabelled node, in no split
    _task(data)


def test_float_or_two_column_labels_are_refused():
    data = _data()
    data.y = data.y.float()
    with pytest.raises(ValueError, match="class labels must be integers, got y of dtype torch.float32"):
        _task(data)
    data.y = data.y.long().view(-1, 1)
    with pytest.raises(ValueError, match=r"must have shape \(num_nodes,\), got \(30, 1\)"):
        _task(data)


def test_masks_must_be_bool_one_per_node_and_not_empty():
    data = _data()
    data.val_mask = data.val_mask.nonzero().view(-1)
    with pytest.raises(ValueError, match="val_mask must be a bool tensor, got dtype torch.int64.*index tensor"):
        _task(data)
    data = _data()
    data.test_mask = data.test_mask[:10]
    with pytest.raises(ValueError, match=r"test_mask has shape \(10,\); it must be \(30,\)"):
        _task(data)
    data = _data()
    data.train_mask = torch.zeros(30, dtype=torch.bool)
    with pytest.raises(ValueError, match="train_mask selects no node"):
        _task(data)
    data = _data()
    del data.train_mask
    with pytest.raises(ValueError, match="train_mask is missing"):
        _task(data)


def test_graph_tasks_check_each_graphs_labels():
    graphs = {s: [Data(x=torch.randn(3, 4), edge_index=torch.zeros(2, 0, dtype=torch.long), y=torch.tensor([1]))]
              for s in ("train", "val", "test")}
    graphs["test"][0].y = torch.tensor([5])
    with pytest.raises(ValueError, match=r"1 test label\(s\) outside \[0, 2\)"):
        Task(name="g", kind="graph", metric="accuracy", num_features=4, num_classes=2, multilabel=False, graphs=graphs)


def test_from_data_converts_index_masks_and_column_labels():
    data = _data()
    data.y = data.y.view(-1, 1)
    for s in ("train", "val", "test"):
        data[f"{s}_mask"] = data[f"{s}_mask"].nonzero().view(-1)
    task = Task.from_data(data)
    assert task.data.y.shape == (30,) and task.data.train_mask.dtype == torch.bool
    assert task.num_classes == 3 and int(task.data.val_mask.sum()) == 10


def test_from_data_without_masks_asks_for_a_split():
    data = _data()
    del data.train_mask, data.val_mask, data.test_mask
    with pytest.raises(ValueError, match=r"no train_mask, val_mask, test_mask.*split=\(train_ratio, val_ratio\)"):
        Task.from_data(data)
    task = Task.from_data(data, split=(0.6, 0.2), seed=1)
    assert task.split_sizes() == {"train": 18, "val": 6, "test": 6}
