"""Shared inputs and the plain-ops reference for the compiled attention tests."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from tests.conftest import awkward_graph
from zoo.ops.aggregate import edge_orders
from zoo.ops.segment import segment_softmax, segment_sum

TOL = dict(rtol=0, atol=1e-10)
SLOPE = 0.2


def hub_graph(extra: int = 40) -> Tuple[Tensor, int]:
    """The awkward graph (isolated node, self-loop, duplicate edge) plus ``extra`` nodes more: node 7
    receives from all of them and from node 3 (degree extra + 1 > the block size), sends to 5 of them;
    with 40, more than one 32-destination block."""
    edge_index, n = awkward_graph()
    hubs = torch.arange(n + 1, n + 1 + extra)
    into_hub = torch.stack([hubs, torch.full_like(hubs, n)])
    out_of_hub = torch.stack([torch.full((5,), n), hubs[:5]])
    return torch.cat([edge_index, into_hub, out_of_hub, torch.tensor([[3], [n]])], 1), n + 1 + extra


def plain_gatv2(x_src, x_dst, values, att, src, dst, n, bias=None):
    z = x_src.index_select(0, src) + x_dst.index_select(0, dst)
    e = (F.leaky_relu(z, SLOPE) * att).sum(-1)
    alpha = segment_softmax(e, dst, n)
    return segment_sum(alpha.unsqueeze(-1) * values.index_select(0, src), dst, n), alpha


def plain_gat(score_src, score_dst, bias, values, src, dst, n):
    z = score_src.index_select(0, src) + score_dst.index_select(0, dst)
    e = F.leaky_relu(z if bias is None else z + bias, SLOPE)
    alpha = segment_softmax(e, dst, n)
    return segment_sum(alpha.unsqueeze(-1) * values.index_select(0, src), dst, n), alpha


def make_inputs(family: str, heads: int = 2, channels: int = 5, value_channels: Optional[int] = None,
                bias: bool = True, seed: int = 0, dtype=torch.float64, extra: int = 40) -> Dict[str, object]:
    """Random float64 inputs on the hub graph (requires_grad on every float input)."""
    edge_index, n = hub_graph(extra)
    e = edge_index.size(1)
    g = torch.Generator().manual_seed(seed)
    cv = channels if value_channels is None else value_channels

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).requires_grad_()

    if family == "gatv2":
        tensors = dict(x_src=rand(n, heads, channels), x_dst=rand(n, heads, channels), values=rand(n, heads, cv),
                       att=rand(heads, channels))
    else:
        tensors = dict(score_src=rand(n, heads, scale=2.0), score_dst=rand(n, heads, scale=2.0),
                       bias=rand(e, heads) if bias else None, values=rand(n, heads, cv))
    return dict(tensors=tensors, src=edge_index[0], dst=edge_index[1], n=n,
                orders=edge_orders(edge_index[0], edge_index[1], n))


def reference(family: str, case: Dict[str, object]) -> Callable[..., Tuple[Tensor, Tensor]]:
    src, dst, n = case["src"], case["dst"], case["n"]
    if family == "gatv2":
        return lambda x_src, x_dst, values, att: plain_gatv2(x_src, x_dst, values, att, src, dst, n)
    return lambda score_src, score_dst, bias, values: plain_gat(score_src, score_dst, bias, values, src, dst, n)


def fused(family: str, case: Dict[str, object], gatv2_fn, gat_fn, triton: bool = False) -> Callable[..., Tuple[Tensor, Tensor]]:
    """The compiled op of ``family`` on the case's graph, its arguments built once for the backend
    (``triton``: with the degree buckets) and passed to ``gatv2_fn`` / ``gat_fn`` last."""
    from zoo.ops._compiled.ops import graph_arguments

    graph = graph_arguments(case["orders"], triton)
    if family == "gatv2":
        return lambda x_src, x_dst, values, att: gatv2_fn(x_src, x_dst, values, att, SLOPE, graph)
    return lambda score_src, score_dst, bias, values: gat_fn(score_src, score_dst, bias, values, SLOPE, graph)


def assert_same(f, ref, inputs, tol=TOL) -> Tuple[Tensor, Tensor]:
    """Values, then gradients of a loss on ``out`` and ``alpha``, then of one on ``out`` alone; returns
    ``f``'s ``(out, alpha)`` for further checks (no second call of ``f``)."""
    names = [k for k, v in inputs.items() if v is not None]
    args = list(inputs.values())
    out, alpha = f(*args)
    r_out, r_alpha = ref(*args)
    torch.testing.assert_close(out, r_out, **tol)
    torch.testing.assert_close(alpha, r_alpha, **tol)
    assert out.abs().sum() > 0
    g = torch.Generator().manual_seed(1)
    w_out = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out)
    w_alpha = torch.randn(alpha.shape, generator=g, dtype=torch.float64).to(out)
    leaves = [inputs[k] for k in names]
    for with_alpha in (True, False):
        loss = (out * w_out).sum() + ((alpha * w_alpha).sum() if with_alpha else 0)
        r_loss = (r_out * w_out).sum() + ((r_alpha * w_alpha).sum() if with_alpha else 0)
        grads = torch.autograd.grad(loss, leaves, retain_graph=True)
        r_grads = torch.autograd.grad(r_loss, leaves, retain_graph=True)
        for name, a, b in zip(names, grads, r_grads):
            torch.testing.assert_close(a, b, **tol, msg=lambda m: f"d {name} (alpha in loss: {with_alpha}): {m}")
    return out, alpha
