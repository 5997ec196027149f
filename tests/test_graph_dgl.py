"""DGL graphs as model input, against real DGL (``make test-dgl``; docs/dgl.md).

Skipped where ``import dgl`` fails or DGL is not installed (the default environment has none: its
torch is newer than any DGL release supports); ``make test-dgl`` runs them in ``.venv-dgl``, with
:func:`test_duck_typed_adapter_on_a_dgl_graph_built_without_graphbolt` (a real ``DGLGraph`` object
built with graphbolt stubbed).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch

import zoo
from zoo.graph import as_graph, input_edge_ids, read_edge_features
from tests.conftest import awkward_graph
from tests.dgl_support import real_dgl

pytestmark = pytest.mark.dgl


def _graph(dgl):
    edge_index, n = awkward_graph()
    return dgl.graph((edge_index[0], edge_index[1]), num_nodes=n), edge_index, n


def test_batched_graphs_are_the_disjoint_union():
    dgl = real_dgl()
    g1, ei1, n1 = _graph(dgl)
    g2 = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=3)
    batch = dgl.batch([g1, g2])
    x = torch.randn(n1 + 3, 4)
    model = zoo.build("gatv2", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2).eval()
    union = torch.cat([ei1, torch.tensor([[0, 1, 2], [1, 2, 0]]) + n1], dim=1)
    torch.testing.assert_close(model(batch, x), model(union, x))
    torch.testing.assert_close(model(batch, x)[:n1], model(g1, x[:n1]))


def test_heterographs_and_blocks_are_refused_with_what_to_pass():
    dgl = real_dgl()
    hetero = dgl.heterograph({("user", "follows", "user"): ([0], [1]), ("user", "buys", "item"): ([0], [0])})
    model = zoo.build("gat", in_dim=2, out_dim=2)
    with pytest.raises(TypeError, match="heterographs are not supported.*dgl.to_homogeneous"):
        model(hetero, torch.randn(2, 2))
    g, _, n = _graph(dgl)
    block = dgl.to_block(g, torch.tensor([1, 3]))
    with pytest.raises(TypeError, match="blocks .* are not supported.*homogeneous DGLGraph"):
        model(block, torch.randn(block.num_src_nodes(), 2))


def test_edge_features_from_edata():
    dgl = real_dgl()
    g, edge_index, n = _graph(dgl)
    edge_attr = torch.randn(g.num_edges(), 3)
    x = torch.randn(n, 4)
    model = zoo.build("gatv2", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2, edge_encoder="linear",
                      edge_dim=3).eval()
    expected = model(edge_index, x, edge_attr=edge_attr)
    g.edata["w"] = edge_attr
    torch.testing.assert_close(model(g, x), expected)  # the single edge-feature tensor
    g.edata["other"] = torch.randn(g.num_edges(), 5)
    with pytest.raises(ValueError, match=r"several edge features in g.edata \('other', 'w'\).*edge_attr='other'"):
        model(g, x)
    torch.testing.assert_close(model(g, x, edge_attr="w"), expected)  # a named key
    with pytest.raises(ValueError, match="no edge feature 'nope'"):
        model(g, x, edge_attr="nope")
    with pytest.raises(ValueError, match=r"edge_attr must have shape \(E, 3\), got \(12, 5\)"):
        model(g, x, edge_attr="other")
    assert read_edge_features(g, "w") is edge_attr


def test_in_place_edits_keeping_the_counts_are_seen():
    dgl = real_dgl()
    g, _, n = _graph(dgl)
    x = torch.randn(n, 4)
    model = zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2).eval()
    before = model(g, x)
    g.remove_edges(torch.tensor([0]))  # 0 -> 1
    g.add_edges(torch.tensor([6]), torch.tensor([0]))  # the isolated node 6 -> 0: same counts
    src, dst = g.edges(order="eid")
    after = model(g, x)
    torch.testing.assert_close(after, model(torch.stack([src, dst]), x))
    assert not torch.allclose(after, before)


def test_attention_aligned_to_dgl_edge_ids():
    dgl = real_dgl()
    g, edge_index, n = _graph(dgl)
    x = torch.randn(n, 4)
    model = zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=8, num_layers=1, heads=2).eval()
    _, records = model(g, x, return_attention=True)
    ids = input_edge_ids(g, x, model.self_loops)
    kept = ids >= 0
    per_edge = torch.full((g.num_edges(), 2), float("nan"))
    per_edge[ids[kept]] = records[0].alpha[kept]
    src, dst = g.edges(order="eid")
    normalised = as_graph(g, x, model.self_loops).edge_index
    for eid in range(g.num_edges()):
        if src[eid] == dst[eid]:  # the "add" policy replaced the input's self-loop by its own
            assert torch.isnan(per_edge[eid]).all()
            continue
        position = ids.tolist().index(eid)
        assert normalised[:, position].tolist() == [int(src[eid]), int(dst[eid])]
        torch.testing.assert_close(per_edge[eid], records[0].alpha[position])


@pytest.mark.parametrize("policy", ["add", "keep", "remove"])
def test_input_edge_ids_follow_the_policy(policy):
    edge_index, n = awkward_graph()
    x = torch.randn(n, 2)
    ids = input_edge_ids(edge_index, x, policy)
    g = as_graph(edge_index, x, policy)
    kept = ids >= 0
    assert torch.equal(g.edge_index[:, kept], edge_index[:, ids[kept]])
    assert torch.equal(g.src[~kept], g.dst[~kept])  # only added self-loops have no input edge


@pytest.mark.dgl
def test_duck_typed_adapter_on_a_dgl_graph_built_without_graphbolt():
    """Where real DGL does not import (graphbolt needs an older torch), a DGLGraph object can still be
    built with graphbolt stubbed: in a subprocess, so the stub never reaches this test session."""
    if importlib.util.find_spec("dgl") is None:  # not installed: no process to start (make test-dgl has it)
        pytest.skip("dgl is not installed here")
    code = (
        "import sys, types, torch\n"
        "stub = types.ModuleType('dgl.graphbolt'); stub.__path__ = []; sys.modules['dgl.graphbolt'] = stub\n"
        "try:\n    import dgl\nexcept Exception as e:\n    print('SKIP', type(e).__name__, e); raise SystemExit(0)\n"
        "import zoo\n"
        "ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 2]])\n"
        "g = dgl.graph((ei[0], ei[1]), num_nodes=4); x = torch.randn(4, 3)\n"
        "m = zoo.build('gatv2', in_dim=3, out_dim=2).eval()\n"
        "torch.testing.assert_close(m(g, x), m(ei, x)); print('OK')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.startswith("SKIP"):
        pytest.skip(f"dgl is not installed here: {out.stdout.strip()}")
    assert out.stdout.strip().endswith("OK")
