"""Custom ops under one vmap called through their rules directly (zoo/ops/_direct.py): the same
bits as through the dispatcher, without torch.library's and functorch's Python layers."""
from __future__ import annotations

import sys
from typing import Callable, List, Set, Tuple

import pytest
import torch
from torch import Tensor
from torch.func import vmap

from zoo.graph import Graph
from zoo.ops._custom import HAS_CUSTOM_OPS
from zoo.ops._direct import dispatched, vmapped
from zoo.ops.sparse_linear import linear

compiled = pytest.importorskip("zoo.ops._compiled.ops")
pytestmark = [pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="torch < 2.4: no custom ops"),
              pytest.mark.skipif(not compiled.available(torch.device("cpu")), reason="no compiled CPU kernels")]

R, N, F, C = 4, 9, 300, 3


def _graph() -> Graph:
    g = torch.Generator().manual_seed(1)
    src, dst = torch.randint(0, N, (2, 30), generator=g)
    return Graph(torch.stack([torch.cat([src, torch.arange(N)]), torch.cat([dst, torch.arange(N)])]), N, False)


def _inputs() -> Tuple[Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(N, F, generator=g) < 0.05).float() * torch.rand(N, F, generator=g)
    w = torch.randn(R, 2 * C, F, generator=g).requires_grad_()
    att = torch.randn(R, 2, C, generator=g).requires_grad_()
    score_w = torch.randn(R, 4, 2 * C, generator=g).requires_grad_()
    edges = _graph().edge_index.size(1)
    keep = (torch.rand(R, edges, 2, generator=g) < 0.7) / 0.7  # attention dropout's mask
    bias = torch.randn(R, edges, 2, generator=g).requires_grad_()  # GATDB's per-edge score term
    return x, w, att, score_w, bias, keep


def _stacked_model(x: Tensor, graph: Graph) -> Callable[..., Tensor]:
    """A sparse first layer, GATv2's attention (one tensor as sources, targets and values, as with
    shared weights) and GAT's: every op with a direct path."""
    args = compiled.graph_arguments_of(graph)

    def f(w: Tensor, att: Tensor, score_w: Tensor, bias: Tensor, keep: Tensor) -> Tensor:
        h = linear(x, w).view(N, 2, C)
        out, alpha = compiled.gatv2_attention(h, h, h, att, 0.2, args, keep=keep)
        scores = out.reshape(N, -1) @ score_w.t()
        out2, alpha2 = compiled.gat_attention(scores[:, :2], scores[:, 2:], bias, out.relu(), 0.2, args)
        return out2.square().sum() + alpha.sum() * 0.5 + alpha2.square().sum()
    return f


def _run(f: Callable[..., Tensor], params: Tuple[Tensor, ...]) -> List[Tensor]:
    out = vmap(f)(*params)
    return [out.detach(), *torch.autograd.grad(out.sum(), params[:4])]


@pytest.mark.parametrize("fold", [False, True], ids=["replicas_first", "folded"])
def test_the_direct_calls_give_the_dispatched_bits(fold, monkeypatch):
    """Both ways the C++ ops take replicas: replicas first, and folded into the heads (values larger
    than the cache budget per replica)."""
    from zoo.ops._compiled import rules

    if fold:
        monkeypatch.setattr(rules, "FOLD_MAX_BYTES", 0)
    x, *params = _inputs()
    f = _stacked_model(x, _graph())
    direct = _run(f, tuple(params))
    with dispatched():
        through = _run(f, tuple(params))
    for a, b in zip(direct, through):
        assert torch.equal(a, b)
    with torch.no_grad():
        assert torch.equal(vmap(f)(*params), direct[0])


def _python_calls(fn: Callable[[], object]) -> Set[str]:
    seen: Set[str] = set()

    def hook(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code.co_name)
    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_under_one_vmap_no_torch_library_layer_runs():
    x, *params = _inputs()
    f = _stacked_model(x, _graph())
    layers = {"custom_function_call_vmap_helper", "autograd_impl", "fill_defaults", "redispatch"}
    with dispatched():
        assert layers & _python_calls(lambda: _run(f, tuple(params))) == layers
    assert not layers & _python_calls(lambda: _run(f, tuple(params)))


def test_nested_vmap_and_no_vmap_go_through_the_dispatcher():
    x, w, *_ = _inputs()
    assert vmapped(lambda *a: pytest.fail("called"), (x, w)) is None  # no vmap
    inner = lambda w2: linear(x, w2)  # noqa: E731
    nested = vmap(vmap(inner))(w.detach().view(2, R // 2, 2 * C, F))
    assert torch.equal(nested.reshape(R, N, 2 * C), vmap(inner)(w.detach()))


def test_a_call_traced_by_torch_compile_goes_through_the_dispatcher(monkeypatch):
    from zoo.ops import _direct

    x, w, *_ = _inputs()
    monkeypatch.setattr(_direct, "_compiling", lambda: True)  # the op stays opaque to dynamo
    calls = []
    vmap(lambda w2: calls.append(vmapped(lambda *a: pytest.fail("called"), (x, w2))) or w2)(w.detach())
    assert calls == [None]


@pytest.mark.parametrize("relu", [False, True])
def test_stacked_propagation_gives_the_dispatched_bits(relu):
    """GCN's propagation (``zoo::csr_propagate``, with its ReLU inside: the gated op in the backward),
    two layers under vmap, values, gradients and a second-order gradient (the backward's own backward)."""
    from zoo.ops.propagate import propagate

    graph = _graph()
    g = torch.Generator().manual_seed(3)
    coef = torch.rand(graph.edge_index.size(1), 1, generator=g)
    x = torch.randn(N, 5, generator=g)
    w = torch.randn(R, 5, 4, generator=g).requires_grad_()

    def f(w1: Tensor) -> Tensor:
        h = propagate(graph, coef, x @ w1, "test_direct", relu=relu)
        return propagate(graph, coef, h * h, "test_direct", relu=relu)

    def run() -> List[Tensor]:
        out = vmap(f)(w)
        (gw,) = torch.autograd.grad(out.square().sum(), (w,), create_graph=True)
        return [out.detach(), gw.detach(), *torch.autograd.grad(gw.square().sum(), (w,))]

    direct = run()
    with dispatched():
        through = run()
    for a, b in zip(direct, through):
        assert torch.equal(a, b)
    layers = {"custom_function_call_vmap_helper", "autograd_impl", "fill_defaults"}
    assert not layers & _python_calls(run)
