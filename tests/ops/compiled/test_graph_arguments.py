"""The compiled ops take every per-graph tensor as an argument, built once per graph: a layer's calls
reuse them (nothing is computed from the graph per call, no degree split, no host synchronisation),
and a changed graph gets its own."""
from __future__ import annotations

import pytest
import torch

from tests.ops.compiled.cases import hub_graph
from zoo.graph import as_graph
from zoo.models.gat import GATLayer
from zoo.models.gatv2 import GATv2Layer
from zoo.ops._compiled import ops
from zoo.ops._compiled.degree_buckets import split_by_degree
from zoo.ops.aggregate import edge_orders

pytestmark = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                reason="the C++ attention kernels could not be built here (no compiler?)")


def _count_builds(monkeypatch):
    calls = []
    original = ops.graph_arguments
    monkeypatch.setattr(ops, "graph_arguments", lambda orders, triton: calls.append(triton) or original(orders, triton))
    return calls


@pytest.mark.parametrize("layer_cls", [GATLayer, GATv2Layer])
def test_built_once_per_graph_and_reused_across_calls(monkeypatch, layer_cls):
    calls = _count_builds(monkeypatch)
    edge_index, n = hub_graph(extra=6)
    x = torch.randn(n, 8)
    layer = layer_cls(8, 4, 2)
    graph = as_graph(edge_index, x)
    first = ops.graph_arguments_of(graph)
    for _ in range(3):  # forward and backward, three times
        layer(graph, x)[0].sum().backward()
    assert calls == [False] and ops.graph_arguments_of(graph) is first
    layer(as_graph(edge_index, x), x)[0].sum().backward()  # the same edge_index again: as_graph's cached Graph
    assert calls == [False]


def test_a_changed_graph_gets_its_own_arguments(monkeypatch):
    calls = _count_builds(monkeypatch)
    edge_index, n = hub_graph(extra=6)
    x = torch.randn(n, 8)
    layer = GATv2Layer(8, 4, 1)
    before = layer(as_graph(edge_index, x), x)[0]
    edge_index[:, 0] = torch.tensor([n - 1, 0])  # edited in place: another graph
    after = layer(as_graph(edge_index, x), x)[0]
    assert len(calls) == 2
    args = ops.graph_arguments_of(as_graph(edge_index, x))
    want = ops.graph_arguments(edge_orders(*as_graph(edge_index, x).edge_index, n), triton=False)
    assert all(torch.equal(a, b) for a, b in zip(args, want)) and not torch.equal(before, after)


def test_arguments_are_the_csr_layouts_and_for_triton_the_buckets():
    edge_index, n = hub_graph(extra=6)
    orders = edge_orders(edge_index[0], edge_index[1], n)
    perm, crow, col, perm_s, crow_s, col_s = orders
    cpu = ops.graph_arguments(orders, triton=False)
    assert [a is b for a, b in zip(cpu, (crow, col, perm, crow_s, col_s, perm_s))] == [True] * 6
    pytest.importorskip("triton")
    from zoo.ops._compiled import triton_attention

    full = ops.graph_arguments(orders, triton=True)
    assert len(full) == triton_attention.GRAPH_ARGS == 10 and full[:6] == cpu
    for (light, heavy), row_pointer in ((full[6:8], crow), (full[8:10], crow_s)):
        split = split_by_degree(row_pointer, triton_attention.BLOCK_E)
        assert torch.equal(light, split.light) and torch.equal(heavy, split.heavy)


def test_a_call_computes_nothing_from_the_graph(monkeypatch):
    """With the arguments built, a layer's forward and backward make no degree split and no host
    synchronisation of the graph's own (``nonzero``, ``bincount``, ``argsort``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    edge_index, n = hub_graph(extra=6)
    x = torch.randn(n, 8)
    layer = GATv2Layer(8, 4, 2)
    graph = as_graph(edge_index, x)
    ops.graph_arguments_of(graph)
    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    with Record():
        layer(graph, x)[0].sum().backward()
    graph_work = {"aten.nonzero", "aten.bincount", "aten.argsort", "aten.sort", "aten.cumsum", "aten.item",
                  "aten._local_scalar_dense"}
    # (shared weights: the backward of the one tensor, gatv2_backward_summed)
    assert "zoo_kernels.gatv2_forward" in seen and any(s.startswith("zoo_kernels.gatv2_backward") for s in seen)
    assert graph_work.isdisjoint(seen), sorted(graph_work.intersection(seen))
