"""The Triton attention kernels, without a GPU: in Triton's interpreter (``TRITON_INTERPRET=1``,
CPU tensors) against the plain torch ops at float64 to 1e-10 — values and gradients, an isolated
node, a row of degree 41 (> BLOCK_E), C = 5, several heads, vmap R = 3 — and opcheck on every op."""
from __future__ import annotations

import os

import pytest
import torch
from torch.func import vmap

pytest.importorskip("triton", reason="triton is not installed (pip install gat-zoo[cuda])")
os.environ.setdefault("TRITON_INTERPRET", "1")
from tests.ops.compiled.conftest import TRITON_IMPORTED_EARLY  # noqa: E402

if TRITON_IMPORTED_EARLY:
    pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set: run this file on its own",
                allow_module_level=True)

from tests.ops.compiled.cases import assert_same, fused, make_inputs, reference  # noqa: E402
from tests.ops.compiled.test_cpu_attention import _stack  # noqa: E402
from zoo.ops._compiled import ops, triton_attention  # noqa: E402

FAMILIES = ["gatv2", "gat"]
#: The interpreter runs each (destination, head) program in numpy: small graphs, and blocks of 4 edges
#: so that the hub's row (degree 7) still spans two blocks.
EXTRA = 6


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    monkeypatch.setattr(triton_attention, "BLOCK_E", 4)
    monkeypatch.setattr(triton_attention, "BLOCK_N", 4)


def _call(name):
    return getattr(torch.ops.zoo_triton, name)


def gatv2(x_src, x_dst, values, att, slope, orders):
    out, alpha, _ = _call("gatv2_forward")(x_src, x_dst, values, att, *ops._graph(orders), slope)
    return out, alpha


def gat(score_src, score_dst, bias, values, slope, orders):
    out, alpha, _ = _call("gat_forward")(score_src, score_dst, bias, values, *ops._graph(orders), slope)
    return out, alpha


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("heads,channels,value_channels", [(2, 5, 7)])
def test_interpreted_equals_plain(family, heads, channels, value_channels):
    case = make_inputs(family, heads, channels, value_channels, extra=EXTRA)
    assert triton_attention.BLOCK_E < int(torch.bincount(case["dst"]).max())  # a row spans several blocks
    assert_same(fused(family, case, gatv2, gat), reference(family, case), case["tensors"])


def test_interpreted_gat_without_bias():
    case = make_inputs("gat", heads=1, bias=False, extra=EXTRA)
    assert_same(fused("gat", case, gatv2, gat), reference("gat", case), case["tensors"])


@pytest.mark.parametrize("family", FAMILIES)
def test_interpreted_under_vmap(family):
    case = make_inputs(family, heads=1, channels=3, extra=EXTRA)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    assert_same(vmap(fused(family, case, gatv2, gat), in_dims=dims), vmap(reference(family, case), in_dims=dims),
                stacked)


QUICK_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("checks", [QUICK_CHECKS, pytest.param(None, marks=pytest.mark.slow)], ids=["quick", "full"])
def test_opcheck(family, checks):
    """Quick: schema, autograd registration, fake tensors; full (slow, interpreted): aot_dispatch too."""
    kwargs = {} if checks is None else dict(test_utils=checks)
    case = make_inputs(family, heads=1, channels=3, extra=5)
    t = case["tensors"]
    graph = ops._graph(case["orders"])
    if family == "gatv2":
        fixed = (t["x_src"], t["x_dst"], t["values"], t["att"])
    else:
        fixed = (t["score_src"], t["score_dst"], t["bias"], t["values"])
    fwd, bwd = _call(f"{family}_forward"), _call(f"{family}_backward")
    torch.library.opcheck(fwd, (*fixed, *graph, 0.2), **kwargs)
    out, alpha, lse = fwd(*[a.detach() for a in fixed], *graph, 0.2)
    for ga in (torch.randn_like(alpha), None):
        torch.library.opcheck(bwd, (torch.randn_like(out), ga, *[a.detach() for a in fixed], out, lse, *graph, 0.2),
                              **kwargs)
