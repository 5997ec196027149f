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


def _edits():
    """Three edits of a loaded task (a 5-node training mask, zeroed features, permuted labels)."""
    def five(t):
        keep = torch.zeros_like(t.data.train_mask)
        keep[t.data.train_mask.nonzero().view(-1)[:5]] = True
        t.data.train_mask = keep

    def zero(t):
        t.data.x.zero_()

    def permute(t):
        t.data.y = t.data.y[torch.randperm(t.data.y.numel(), generator=torch.Generator().manual_seed(0))]

    return five, zero, permute


def test_an_edited_loaded_task_is_not_the_cell_of_its_recipe():
    plain = _cell("cornell")
    ids = set()
    for edit in _edits():
        task = load("cornell")
        edit(task)
        cell = _cell(task)
        assert cell.config["task"]["dataset"] == "cornell"  # where the data came from ...
        assert cell.config["task"]["fingerprint"] == task.fingerprint()  # ... and what it is now
        ids.add(cell.id)
    assert len(ids) == 3 and plain.id not in ids
    equal = load("cornell")
    equal.data.x = equal.data.x.clone()  # replaced by equal data: the recipe's cell
    assert _cell(equal).id == plain.id


def test_a_user_task_edited_in_place_gets_the_id_of_its_new_content():
    task = Task.from_data(_graph(), name="mine", split=(0.5, 0.25))
    before = _cell(task).id
    task.data.x += 100
    after = _cell(task)
    assert after.id != before
    assert after.id == _cell(Task.from_data(task.data, name="mine", split=(0.5, 0.25))).id


def test_training_from_given_weights_records_their_hash():
    task = load("cornell")
    build = dict(in_dim=task.num_features, out_dim=task.num_classes, num_layers=2, hidden_dim=8)
    torch.manual_seed(0)
    a = zoo.build("gat", **build)
    torch.manual_seed(1)
    b = zoo.build("gat", **build)
    run = dict(epochs=1, keep_models=False)
    first, second = zoo.fit(a, "cornell", **run).cells[0], zoo.fit(b, "cornell", **run).cells[0]
    assert first.config["model"]["weights"] != second.config["model"]["weights"]
    assert len({first.id, second.id, _cell("cornell").id}) == 3
    assert zoo.fit(a, "cornell", **run).cells[0].id == first.id  # the same weights, the same cell


def test_a_registered_dataset_registered_again_with_other_data_gets_other_cells(monkeypatch, tmp_path):
    from zoo.bench.run.driver import run_suite
    from zoo.bench.run.options import RunOptions
    from zoo.bench.store.records import SuiteMismatchError
    from zoo.bench.suite.load import parse_suite
    from zoo.datasets import DATASETS, register_dataset

    monkeypatch.setattr(DATASETS, "_items", dict(DATASETS._items))  # the registration ends with the test
    graph = {"now": _graph(seed=0)}

    def register():  # a notebook cell, run again
        @register_dataset("regd_probe", kind="transductive", metric="accuracy", source="a test")
        def loader(root, split, seed, **_):
            return Task.from_data(graph["now"], name="regd_probe", split=(0.5, 0.25), seed=seed)

    register()
    raw = {"suite": {"name": "regd_probe"}, "grid": {"seed": [0, 1]},
           "defaults": {"dataset": "regd_probe", "model": "gat", "num_layers": 1, "hidden_dim": 8, "epochs": 1},
           "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"}}
    first = parse_suite(raw).cells
    assert first[0].config["task"]["fingerprint"] == Task.from_data(graph["now"], split=(0.5, 0.25)).fingerprint()
    assert run_suite(parse_suite(raw), tmp_path, RunOptions(quiet=True)).ran == 2
    assert parse_suite(raw).cells[0].id == first[0].id  # the same data, the same cells
    graph["now"] = _graph(seed=1)
    with pytest.warns(UserWarning, match=r"regd_probe.*replacing it; it now loads other data \(fingerprint"):
        register()
    assert {c.id for c in parse_suite(raw).cells}.isdisjoint({c.id for c in first})
    with pytest.raises(SuiteMismatchError, match="dataset 'regd_probe' now holds other data"):
        run_suite(parse_suite(raw), tmp_path, RunOptions(quiet=True))  # not "2 already done" with the old graph's numbers
