"""A user's own graph: numpy / scipy inputs taken, every problem one line naming the fix."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

import zoo
from zoo.datasets import Task

N = 30


def _graph(**extra):
    g = torch.Generator().manual_seed(0)
    base = dict(x=torch.randn(N, 4, generator=g), edge_index=torch.randint(0, N, (2, 90), generator=g),
                y=torch.arange(N) % 3)
    return Data(**{**base, **extra})


def _masks(train, val, test):
    return dict(train_mask=torch.tensor(train), val_mask=torch.tensor(val), test_mask=torch.tensor(test))


@pytest.mark.parametrize("data, message", [
    (_graph(y=(torch.arange(N) % 3).float()), r"class labels must be integers, got y of dtype torch.float32 \(use y.long\(\)\)"),
    (_graph(y=None), r"the graph has no labels: set data.y"),
    (_graph(y=(torch.rand(N, 3) > 0.5).float()), r"y is a \(30, 3\) float matrix: several labels per node\? pass "
                                                  r"multilabel=True"),
    (_graph(y=torch.where(torch.arange(N) == 7, 7, torch.arange(N) % 3)),
     r"the labels go up to 7, but no node has class 3, 4, 5, 6: a stray label\? pass num_classes=8"),
])
def test_labels_that_cannot_be_trained_on_say_what_to_pass(data, message):
    with pytest.raises(ValueError, match=message):
        Task.from_data(data, split=(0.6, 0.2))


_MASKS = _masks([0, 1], [2, 3], [4, 5])


@pytest.mark.parametrize("data, message", [
    (Data(x=torch.randn(N, 4).tolist(), edge_index=torch.zeros(2, 0, dtype=torch.long), y=torch.arange(N) % 3),
     r"data.x must be a tensor .*got list; use torch.as_tensor\(x, dtype=torch.float\)"),
    (_graph(x=torch.randn(N)), r"data.x has shape \(30,\); .*\(one feature per node: x.view\(-1, 1\)\)"),
    (Data(x=torch.randn(N, 4), y=torch.arange(N) % 3), r"the graph has no edge_index: .*torch.empty\(2, 0"),
    (_graph(edge_index=torch.zeros(90, 2, dtype=torch.long)), r"got \(90, 2\); if you have an \(E, 2\) edge list"),
    (_graph(edge_index=torch.zeros(2, 9)), r"integer node indices, got dtype torch.float32 \(use edge_index.long\(\)\)"),
    (_graph(edge_index=torch.tensor([[0, 1], [2, 30]])), r"edge_index refers to node 30 but the graph has 30 nodes"),
    (_graph(y=(torch.arange(N) % 3).tolist()), r"data.y must be a tensor, got list; use torch.as_tensor\(y\)"),
    (_graph(y=torch.arange(20) % 3), r"y has shape \(20,\) but the graph has 30 nodes \(x has 30 rows\)"),
])
def test_fields_a_model_reads_are_checked_up_front(data, message):
    for key, value in _MASKS.items():
        data[key] = value
    with pytest.raises(ValueError, match=message):
        Task.from_data(data)


def test_integer_labels_of_any_width_are_class_labels():
    task = Task.from_data(_graph(y=(np.arange(N) % 3).astype(np.int32), **_MASKS))
    assert task.data.y.dtype == torch.long and task.num_classes == 3


@pytest.mark.parametrize("masks, message", [
    (_masks([0, 1, 40], [2, 3], [4, 5]), "train_mask holds node index 40, outside 0..29"),
    (_masks([0, 1, -1], [2, 3], [4, 5]), "train_mask holds node index -1, outside 0..29"),  # not the last node
    (dict(train_mask=torch.arange(N) < 10, val_mask=torch.arange(N) >= 10, test_mask=torch.arange(N) < 10),
     "train_mask and test_mask share 10 node"),
])
def test_masks_that_would_mislead_are_refused(masks, message):
    with pytest.raises(ValueError, match=message):
        Task.from_data(_graph(**masks))


def test_a_split_beside_the_graphs_own_masks_says_it_replaces_them():
    data = _graph(**_masks([0, 1], [2, 3], [4, 5]))
    with pytest.warns(UserWarning, match=r"split=\(0.6, 0.2\) replaces the graph's own train_mask, val_mask, "
                                         r"test_mask \(drop split to use them\)"):
        history = zoo.fit("gat", data, split=(0.6, 0.2), epochs=1, num_layers=1, hidden_dim=4, keep_models=False)
    assert history.cells[0].config["task"]["fingerprint"] == Task.from_data(_graph(), split=(0.6, 0.2)).fingerprint()


def test_ratios_that_leave_no_test_node_say_so():
    with pytest.raises(ValueError, match=r"split=\(0.8, 0.2\) leaves no node for test"):
        Task.from_data(_graph(), split=(0.8, 0.2))


def test_numpy_and_scipy_inputs_are_tensors():
    ref = Task.from_data(_graph(), split=(0.6, 0.2))
    data = _graph()
    as_numpy = Data(x=data.x.numpy(), edge_index=data.edge_index.numpy(), y=data.y.numpy())
    assert Task.from_data(as_numpy, split=(0.6, 0.2)).fingerprint() == ref.fingerprint()
    ei = data.edge_index.numpy()
    adjacency = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(N, N)).tocsr()
    adjacency.data[:] = 1  # duplicate edges summed: the structure
    task = Task.from_data(Data(x=data.x, edge_index=adjacency, y=data.y), split=(0.6, 0.2))
    assert task.data.edge_index.dtype == torch.long and task.data.edge_index.size(0) == 2
    with pytest.raises(ValueError, match="weighted scipy sparse matrix.*from_scipy_sparse_matrix"):
        Task.from_data(Data(x=data.x, edge_index=adjacency * 2.5, y=data.y), split=(0.6, 0.2))
    history = zoo.fit("gat", as_numpy, split=(0.6, 0.2), epochs=1, num_layers=1, hidden_dim=4, keep_models=False)
    assert history.cells[0].config["task"]["fingerprint"] == ref.fingerprint()
