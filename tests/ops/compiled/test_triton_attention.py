"""The Triton attention kernels, without a GPU: in Triton's interpreter (``TRITON_INTERPRET=1``,
CPU tensors) against the plain torch ops at float64 to 1e-10 — values and gradients, an isolated
node, a row of degree 6 (> BLOCK_E: the heavy bucket, over several blocks), graphs with both
buckets and with light rows only, C = 5 and Cv = 7 (not powers of two), several heads, vmap
R = 2 — the degree buckets computed once per graph, and opcheck on every op."""
from __future__ import annotations

import os

import pytest
import torch
from torch.func import vmap

pytest.importorskip("triton", reason="triton is not installed (pip install gat-zoo[cuda])")
from zoo.ops._compiled import rules as _rules  # noqa: E402
if _rules.unavailable_reason():  # a torch without the op-registration API (< 2.4): the plain ops serve
    pytest.skip(_rules.unavailable_reason(), allow_module_level=True)
os.environ.setdefault("TRITON_INTERPRET", "1")
from tests.ops.compiled.conftest import TRITON_IMPORTED_EARLY  # noqa: E402

if TRITON_IMPORTED_EARLY:
    pytest.skip("triton was imported before TRITON_INTERPRET=1 could be set: run this file on its own",
                allow_module_level=True)

from tests.ops.compiled.cases import assert_same, fused, make_inputs, reference  # noqa: E402
from tests.ops.compiled.test_cpu_attention import _stack  # noqa: E402
from zoo.ops._compiled import ops, triton_attention  # noqa: E402
from zoo.ops._compiled.degree_buckets import split_by_degree  # noqa: E402

FAMILIES = ["gatv2", "gat"]
#: The interpreter runs each (row, head) program in numpy: small graphs, and blocks of 4 edges so
#: that the hub's row (in-degree 6, out-degree 5) is heavy and spans two blocks.
EXTRA = 5
#: (light block = light/heavy threshold, heavy loop block): both buckets, heavy rows over several
#: blocks; both buckets, heavy rows in one block; light rows only.
BLOCKS = {"both-buckets": (4, 4), "heavy-one-block": (4, 8), "light-only": (8, 4)}


@pytest.fixture(scope="module", autouse=True)
def _builtin_names_listed_once():
    """Triton's interpreter patches ``triton.language`` at every kernel launch and every call of a
    ``@triton.jit`` helper, each time listing all members of the language modules
    (``inspect.getmembers``) to find the builtins: about a quarter of this file's time. The modules'
    builtin names do not change, so they are listed once (on the first, unpatched call) and each
    patch then checks only those names' current values, as the interpreter does."""
    from triton.runtime import interpreter

    real = getattr(interpreter, "_patch_builtin", None)
    if real is None or not hasattr(interpreter, "_patch_attr"):
        yield  # another Triton layout: run as it is
        return
    names = {}

    def patch_builtin(pkg, builder, scope):
        if id(pkg) not in names:
            names[id(pkg)] = [n for n, m in interpreter.inspect.getmembers(pkg) if interpreter.tl.core.is_builtin(m)]
        for name in names[id(pkg)]:
            member = getattr(pkg, name)
            if interpreter.tl.core.is_builtin(member):
                interpreter._patch_attr(pkg, name, member, builder, scope)

    interpreter._patch_builtin = patch_builtin
    yield
    interpreter._patch_builtin = real


def _set_blocks(monkeypatch, light, heavy):
    monkeypatch.setattr(triton_attention, "BLOCK_E", light)
    monkeypatch.setattr(triton_attention, "HEAVY_BLOCK_E", heavy)


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch):
    _set_blocks(monkeypatch, *BLOCKS["both-buckets"])
    monkeypatch.setattr(triton_attention, "BLOCK_N", 4)


def _call(name):
    return getattr(torch.ops.zoo_triton, name)


def gatv2(x_src, x_dst, values, att, slope, graph):
    out, alpha, _ = _call("gatv2_forward")(x_src, x_dst, values, att, *graph, slope)
    return out, alpha


def gat(score_src, score_dst, bias, values, slope, graph):
    out, alpha, _ = _call("gat_forward")(score_src, score_dst, bias, values, *graph, slope)
    return out, alpha


def _bucket_sizes(case):
    """(light, heavy) row counts by destination and by source at the current BLOCK_E."""
    _perm, crow, _col, _perm_s, crow_s, _col_s = case["orders"]
    splits = (split_by_degree(row_pointer, triton_attention.BLOCK_E) for row_pointer in (crow, crow_s))
    return [(int(b.light.numel()), int(b.heavy.numel())) for b in splits]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("heads,channels,value_channels", [(2, 5, 7)])
def test_interpreted_equals_plain(family, heads, channels, value_channels):
    case = make_inputs(family, heads, channels, value_channels, extra=EXTRA)
    assert triton_attention.BLOCK_E < int(torch.bincount(case["dst"]).max())  # a row spans several blocks
    assert_same(fused(family, case, gatv2, gat, triton=True), reference(family, case), case["tensors"])


#: The default run covers both buckets (test_interpreted_equals_plain) and light rows only; the
#: interpreter is slow, so the other layouts run with -m slow.
LAYOUTS = [pytest.param(v, id=k, marks=() if k == "light-only" else pytest.mark.slow) for k, v in BLOCKS.items()]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("blocks", LAYOUTS)
def test_interpreted_equals_plain_in_every_bucket_layout(family, blocks, monkeypatch):
    """Three heads (one in the light-only layout: several heads in light rows are
    test_interpreted_equals_plain's), C = 5 (GATv2) and Cv = 3; the isolated node 6 is a light row
    with no edge."""
    _set_blocks(monkeypatch, *blocks)
    heads = 1 if blocks == BLOCKS["light-only"] else 3
    case = make_inputs(family, heads=heads, channels=5, value_channels=3, extra=EXTRA)
    (light, heavy), (light_s, heavy_s) = _bucket_sizes(case)
    assert light + heavy == light_s + heavy_s == case["n"]
    if blocks == BLOCKS["light-only"]:
        assert heavy == heavy_s == 0
    else:  # the hub: in-degree 6 and out-degree 5 > 4
        assert (heavy, heavy_s) == (1, 1) and light and light_s
    out, _alpha = assert_same(fused(family, case, gatv2, gat, triton=True), reference(family, case), case["tensors"])
    assert out[6].abs().max() == 0


def test_interpreted_gat_without_bias_and_buckets_computed_once_per_graph(monkeypatch):
    """GAT without its edge term equals the plain ops; the buckets are made with the graph's
    arguments, one split by destination and one by source, and the forward and both backward calls
    of the comparison make none (the ops take them as arguments)."""
    calls = []

    def counting(crow, block):
        calls.append(block)
        return split_by_degree(crow, block)

    monkeypatch.setattr(ops, "split_by_degree", counting)
    case = make_inputs("gat", heads=1, bias=False, extra=EXTRA)
    f = fused("gat", case, gatv2, gat, triton=True)
    assert calls == [4, 4]
    assert_same(f, reference("gat", case), case["tensors"])  # one forward, two backward
    assert calls == [4, 4]


@pytest.mark.parametrize("family", FAMILIES)
def test_interpreted_under_vmap(family):
    case = make_inputs(family, heads=1, channels=3, extra=EXTRA)  # R = 2 replicas: 2 heads folded
    stacked = _stack(case["tensors"], 2)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    assert_same(vmap(fused(family, case, gatv2, gat, triton=True), in_dims=dims), vmap(reference(family, case), in_dims=dims),
                stacked)


QUICK_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("checks", [QUICK_CHECKS, pytest.param(None, marks=pytest.mark.slow)], ids=["quick", "full"])
def test_opcheck(family, checks):
    """Quick: schema, autograd registration, fake tensors; full (slow, interpreted): aot_dispatch too."""
    kwargs = {} if checks is None else dict(test_utils=checks)
    case = make_inputs(family, heads=1, channels=3, extra=EXTRA)
    t = case["tensors"]
    graph = ops.graph_arguments(case["orders"], triton=True)
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
