"""One clear line for bad inputs and no silent non-finite values."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.datasets.task import Task
from zoo.diagnostics.conservation import gradient_identity, relative_grad_norms
from zoo.nn.encoders import CategoricalEncoder


def test_build_without_a_name():
    with pytest.raises(TypeError, match="zoo.build needs a model name.*got None"):
        zoo.build(None, in_dim=2, out_dim=2)


@pytest.mark.parametrize("kind", ["atom", "bond"])
def test_categorical_codes_out_of_range(kind):
    enc = CategoricalEncoder(kind, None, 8)
    codes = torch.zeros(4, enc.in_dim, dtype=torch.long)
    codes[2, 1] = 1000
    with pytest.raises(ValueError, match=f"got code 1000 in column 1 \\(row 2\\).*{kind} column 1 has codes 0..\\d+"):
        enc(codes)
    codes[2, 1] = -1
    with pytest.raises(ValueError, match="got code -1 in column 1"):
        enc(codes)


def test_categorical_float_codes():
    enc = CategoricalEncoder("atom", None, 8)
    codes = torch.zeros(3, enc.in_dim)
    torch.testing.assert_close(enc(codes), enc(codes.long()))  # exact integers in floats: fine
    codes[0, 0] = 0.5
    with pytest.raises(ValueError, match="reads integer category codes, but got non-integer values"):
        enc(codes)


def test_relative_grad_norms_before_backward():
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2)
    with pytest.raises(RuntimeError, match="gradient_identity needs gradients"):
        gradient_identity(model)
    with pytest.raises(RuntimeError, match="relative_grad_norms needs gradients: call loss.backward"):
        relative_grad_norms(model)
    model(torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 3)).sum().backward()
    assert len(relative_grad_norms(model)) == 2


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


def test_energy_trace_plot_labels_each_trace():
    import matplotlib

    matplotlib.use("Agg")
    from zoo.diagnostics.plots_energy import plot_energy_trace

    ax = plot_energy_trace(torch.tensor([[1.0, 0.1, 0.01], [1.0, 0.5, 0.2]]))  # two traces, one per row
    assert len(ax.get_lines()) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["trace 0", "trace 1"]
    ax = plot_energy_trace({3: [1.0, 0.5], 8: [1.0, 0.1]})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["3", "8"]
    ax = plot_energy_trace([1.0, 0.5, 0.2], first_layer=0)
    assert ax.get_legend() is None and ax.get_xlabel() == "layer k (first = 0)"


def test_docs_state_the_default_data_root():
    from tests.conftest import REPO
    from zoo.datasets.mirror import default_root

    rel = "gat-zoo/datasets"
    assert default_root().as_posix().endswith(rel)
    for doc in ("README.md", "docs/datasets.md"):
        assert f"~/.cache/{rel}" in (REPO / doc).read_text(), f"{doc} states another default data root"


def _edge_model(**kw):
    return zoo.build("gatv2", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2, edge_encoder="linear", edge_dim=3, **kw)


@pytest.mark.parametrize("edge_attr, needle", [
    (torch.randn(5, 4), r"edge_attr must have shape \(E, 3\), got \(5, 4\)"),
    (torch.randn(5), r"edge_attr must have shape \(E, 3\), got \(5,\)"),
    (torch.randn(5, 3, 1), r"edge_attr must have shape \(E, 3\), got \(5, 3, 1\)"),
    (torch.randn(4, 3), "edge_attr has 4 rows but the graph has 5 edges"),
    (torch.ones(5, 3, dtype=torch.long), "linear edge encoder reads continuous features"),
    ([[0.0] * 3] * 5, "edge_attr must be a torch.Tensor"),
])
def test_edge_features_of_the_wrong_shape_are_one_line(edge_attr, needle):
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
    with pytest.raises((ValueError, TypeError), match=needle):
        _edge_model()(edge_index, torch.randn(4, 4), edge_attr=edge_attr)


def test_nan_edge_features_raise_like_nan_node_features(monkeypatch):
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 2]])
    edge_attr = torch.randn(5, 3)
    edge_attr[3, 2] = float("nan")
    x = torch.randn(4, 4)
    with pytest.raises(ValueError, match=r"edge features contain 1 NaN/inf value\(s\) \(first at row 3, column 2"):
        _edge_model()(edge_index, x, edge_attr=edge_attr)
    with pytest.raises(ValueError, match="edge features contain"):  # also read from a Data object
        _edge_model()(Data(edge_index=edge_index, edge_attr=edge_attr, num_nodes=4), x)
    assert _edge_model(check_inputs=False)(edge_index, x, edge_attr=edge_attr).shape == (4, 2)  # opted out
    monkeypatch.setenv("ZOO_CHECK_INPUTS", "0")
    _edge_model()(edge_index, x, edge_attr=edge_attr)


def test_self_loops_checked_and_normalised_at_build():
    assert zoo.build("gat", in_dim=2, out_dim=2, self_loops="Keep").self_loops == "keep"
    with pytest.raises(ValueError, match="unknown self_loops policy 'sometimes'"):
        zoo.build("gat", in_dim=2, out_dim=2, self_loops="sometimes")
