"""A task's making enters the cells: loaded tasks by their recipe (the keys a suite writes), a user's
graph by its content's fingerprint; a task that cannot be described is refused."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from tests.dgl_support import DGLLike
from zoo.datasets import Task, load

FAST = dict(num_layers=2, hidden_dim=8, epochs=1)


def _cell(task, **options):
    return zoo.fit("gat", task, keep_models=False, **FAST, **options).cells[0]


def _graph(n=40, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, n, (2, 4 * n), generator=g)
    return Data(x=torch.randn(n, 5, generator=g), edge_index=edge_index, y=torch.arange(n) % classes, num_nodes=n)


def test_a_loaded_task_is_the_cell_of_its_recipe():
    plain = _cell("cornell")
    assert _cell(load("cornell")).id == plain.id
    normalised = _cell(load("cornell", transforms=["normalize_features"]))
    assert normalised.id != plain.id
    assert normalised.config["task"]["transforms"] == ["normalize_features"]
    assert normalised.id == _cell("cornell", transforms=["normalize_features"]).id
    drawn = _cell(load("cornell", split="per_class", seed=3))
    assert drawn.id != plain.id and drawn.config["task"]["split"] == "per_class"
    assert drawn.config["task"]["data_seed"] == 3
    assert drawn.id == _cell("cornell", split="per_class", data_seed=3).id
    column = _cell(load("cornell", split=2))
    assert column.id == _cell("cornell", split=2).id != plain.id


def test_a_loaded_task_refuses_dataset_keys_it_would_ignore():
    with pytest.raises(ValueError, match="already fixes its data; split"):
        _cell(load("cornell"), split=3)


def test_a_task_made_with_a_callable_transform_is_refused():
    with pytest.raises(ValueError, match="cannot record how task 'cornell' was made"):
        _cell(load("cornell", transforms=[lambda d: d]))


def test_another_graph_under_a_registered_name_is_refused():
    data = _graph()
    data.train_mask, data.val_mask, data.test_mask = (torch.arange(40) % 3 == k for k in range(3))
    task = Task(name="cora", kind="transductive", metric="accuracy", num_features=5, num_classes=3,
                multilabel=False, data=data)
    with pytest.raises(ValueError, match="task 'cora' holds data that zoo.datasets.load"):
        _cell(task)


def test_user_data_enters_the_cell_id_by_its_content():
    a = Task.from_data(_graph(), split=(0.5, 0.25))
    same = Task.from_data(_graph(), split=(0.5, 0.25))
    other = Task.from_data(_graph(seed=1), split=(0.5, 0.25))
    other_split = Task.from_data(_graph(), split=(0.5, 0.25), seed=1)
    cell = _cell(a)
    assert cell.config["task"]["fingerprint"] == a.fingerprint()
    assert _cell(same).id == cell.id
    assert len({cell.id, _cell(other).id, _cell(other_split).id}) == 3


def _masked(seed=0):
    data = _graph(seed=seed)
    data.train_mask, data.val_mask, data.test_mask = (torch.arange(40) % 3 == k for k in range(3))
    return data


def test_zoo_fit_takes_a_pyg_graph_and_a_dgl_graph_with_node_data():
    data = _masked()
    from_pyg = _cell(data)
    assert from_pyg.config["task"]["fingerprint"] == Task.from_data(data).fingerprint()
    assert _cell(DGLLike(data)).id == from_pyg.id  # the same graph, the same cell
    ratio = _cell(_graph(), split=(0.5, 0.25), data_seed=2)
    assert ratio.config["task"]["fingerprint"] == Task.from_data(_graph(), split=(0.5, 0.25), seed=2).fingerprint()


def test_a_real_dgl_graph_is_a_task():
    from tests.dgl_support import real_dgl

    dgl = real_dgl()
    data = _masked()
    g = dgl.graph((data.edge_index[0], data.edge_index[1]), num_nodes=40)
    for key, name in (("x", "feat"), ("y", "label"), ("train_mask", "train_mask"), ("val_mask", "val_mask"),
                      ("test_mask", "test_mask")):
        g.ndata[name] = data[key]
    assert Task.from_data(g).fingerprint() == Task.from_data(data).fingerprint()
