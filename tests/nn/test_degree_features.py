"""``layer_degree_onehot``: a one-hot degree block beside every layer's input, after its dropout."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

import zoo
from zoo.graph import as_graph
from zoo.nn.degree_features import degree_block

# a path 0-1-2-3 plus the edge 1-3: degrees 1, 3, 2, 2 (both directions stored)
EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 1, 3], [1, 0, 2, 1, 3, 2, 3, 1]])
DEGREES = torch.tensor([1, 3, 2, 2])


def layer_inputs(model, x):
    """The tensors each attention layer receives in one forward pass."""
    seen = []
    hooks = [layer.register_forward_pre_hook(lambda _m, args: seen.append(args[1])) for layer in model.layers]
    model(EDGES, x)
    for h in hooks:
        h.remove()
    return seen


def test_degree_block_is_the_one_hot_degree_without_self_loops():
    g = as_graph(EDGES, torch.zeros(4, 2), "add")  # the added self-loops are not counted
    block = degree_block(g, 4, torch.float64)
    assert block.dtype == torch.float64 and block.shape == (4, 5)
    torch.testing.assert_close(block, torch.nn.functional.one_hot(DEGREES, 5).double())


@pytest.mark.parametrize("family", ["gat", "gatv2"])
def test_every_layer_reads_the_undropped_degrees(family):
    torch.manual_seed(0)
    model = zoo.build(family, in_dim=6, out_dim=3, hidden_dim=8, heads=2, num_layers=3, dropout=0.9,
                      layer_degree_onehot=3).train()
    inputs = layer_inputs(model, torch.ones(4, 6))
    expected = torch.nn.functional.one_hot(DEGREES, 4).float()
    assert [i.shape[1] for i in inputs] == [6 + 4, 8 + 4, 8 + 4]
    for i in inputs:  # dropout 0.9 zeroes most features, never a degree column
        torch.testing.assert_close(i[:, -4:], expected)
    assert (inputs[0][:, :6] == 0).any()


def test_default_model_is_unchanged_and_the_option_trains():
    x = torch.randn(4, 6)
    torch.manual_seed(0)
    plain = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, heads=2)
    assert plain.layers[0].in_dim == 6 and layer_inputs(plain.eval(), x)[0].shape == (4, 6)
    data = Data(x=x, edge_index=EDGES, y=torch.tensor([0, 1, 2, 1]),
                train_mask=torch.tensor([True, True, False, False]), val_mask=torch.tensor([False, False, True, False]),
                test_mask=torch.tensor([False, False, False, True]))
    history = zoo.fit("gat", data, optimizer="adam", lr=0.01, epochs=3, seeds=[0, 1], hidden_dim=8, heads=2,
                      layer_degree_onehot=3, progress=False)
    assert history.seeds == [0, 1] and len(history.final) == 2  # two stacked replicas (vmap) with the block


def test_too_small_a_degree_width_is_one_clear_error():
    model = zoo.build("gat", in_dim=6, out_dim=3, hidden_dim=8, heads=2, layer_degree_onehot=2)
    with pytest.raises(ValueError, match=r"degree 3 but layer_degree_onehot=2.*>= 3"):
        model(EDGES, torch.randn(4, 6))
    with pytest.raises(ValueError, match="layer_degree_onehot"):
        zoo.build("gat", in_dim=6, out_dim=3, layer_degree_onehot=0)
