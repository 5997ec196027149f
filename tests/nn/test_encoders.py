"""Input and edge encoders: one clear line for bad codes and bad edge features."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.nn.encoders import CategoricalEncoder


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
