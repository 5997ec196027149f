"""The Triton attention compiled for a real GPU (skipped without CUDA): the ops on CUDA tensors
against the plain torch ops on the same device — values and gradients at float64 (1e-10) and
float32, a heavy row spanning several blocks of the shipped block sizes, vmap over replicas — and
whole models, compiled against plain and against the CPU.

The interpreter tests (``test_triton_attention.py``) check the kernels' logic on CPU; only these
check what ``triton.jit`` compiles for a GPU (block sizes, masks, int64 offsets at real launch grids).
"""
from __future__ import annotations

import copy
import importlib.util
import os

import pytest
import torch
from torch.func import vmap

#: ``make test-gpu`` sets it: a missing GPU or Triton fails the run instead of skipping it.
if os.environ.get("ZOO_REQUIRE_CUDA") == "1" and not (torch.cuda.is_available() and importlib.util.find_spec("triton")):
    raise RuntimeError("ZOO_REQUIRE_CUDA=1 but torch sees no CUDA device or triton is not installed: run `make "
                       "test-gpu` on a GPU machine with a CUDA build of torch and `pip install gat-zoo[cuda]`")
pytest.importorskip("triton", reason="triton is not installed (pip install gat-zoo[cuda])")
from zoo.ops._compiled import rules as _rules  # noqa: E402
if _rules.unavailable_reason():  # a torch without the op-registration API (< 2.4): the plain ops serve
    pytest.skip(_rules.unavailable_reason(), allow_module_level=True)
from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

from tests.conftest import seeded_double_models  # noqa: E402
from tests.ops.compiled.cases import assert_same, fused, hub_graph, make_inputs, reference  # noqa: E402
from tests.ops.compiled.test_cpu_attention import _stack  # noqa: E402
from zoo.ops.aggregate import edge_orders  # noqa: E402
from zoo.ops import fused as fused_switch  # noqa: E402
from zoo.ops._compiled import ops, triton_attention, triton_kernels  # noqa: E402

#: The kernels' ``@triton.jit`` helpers are decorated when triton is imported; under
#: ``TRITON_INTERPRET=1`` (which ``conftest.py`` sets for the interpreter tests) they cannot be
#: compiled for a GPU.
INTERPRETED = isinstance(triton_kernels._edge_block, InterpretedFunction)
if INTERPRETED and os.environ.get("ZOO_REQUIRE_CUDA") == "1":
    raise RuntimeError("ZOO_REQUIRE_CUDA=1 but triton was imported with TRITON_INTERPRET=1: set TRITON_INTERPRET=0")
pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(INTERPRETED, reason="triton was imported with TRITON_INTERPRET=1: run "
                       "`TRITON_INTERPRET=0 python -m pytest tests/ops/compiled/test_triton_cuda.py`"),
]
FAMILIES = ["gatv2", "gat"]
F32 = dict(rtol=1e-4, atol=1e-5)
#: Hub in-degree 151 > HEAVY_BLOCK_E = 64: the heavy loop runs three blocks, the last one masked.
EXTRA = 150


def _cuda_case(family, dtype=torch.float64, **kwargs):
    case = make_inputs(family, dtype=dtype, extra=EXTRA, **kwargs)
    case["tensors"] = {k: None if v is None else v.detach().cuda().requires_grad_()
                       for k, v in case["tensors"].items()}
    case["src"], case["dst"] = case["src"].cuda(), case["dst"].cuda()
    case["orders"] = edge_orders(case["src"], case["dst"], case["n"])
    return case


def _gatv2(x_src, x_dst, values, att, slope, graph):
    return ops.gatv2_attention(x_src, x_dst, values, att, slope, graph)


def _gat(score_src, score_dst, bias, values, slope, graph):
    return ops.gat_attention(score_src, score_dst, bias, values, slope, graph)


#: The compiled ops through their entry points (on CUDA tensors: Triton), as ``cases.fused`` takes them.
OPS = (_gatv2, _gat)


def test_the_shipped_blocks_make_a_multi_block_heavy_row():
    case = _cuda_case("gat")
    assert int(torch.bincount(case["dst"]).max()) > 2 * triton_attention.HEAVY_BLOCK_E


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_cuda_ops_equal_plain(family, dtype):
    case = _cuda_case(family, dtype=dtype, heads=3, channels=5, value_channels=7)
    out, alpha = fused(family, case, *OPS, triton=True)(*case["tensors"].values())
    assert out.is_cuda and out.dtype == dtype and alpha.is_cuda
    assert_same(fused(family, case, *OPS, triton=True), reference(family, case), case["tensors"],
                tol=dict(rtol=0, atol=1e-10) if dtype == torch.float64 else F32)


def test_cuda_gat_without_bias():
    case = _cuda_case("gat", heads=1, bias=False)
    assert_same(fused("gat", case, *OPS, triton=True), reference("gat", case), case["tensors"])


@pytest.mark.parametrize("family", FAMILIES)
def test_cuda_ops_under_vmap(family):
    case = _cuda_case(family, heads=2, channels=3)
    stacked = _stack(case["tensors"], 3)
    dims = tuple(None if v is None else 0 for v in stacked.values())
    assert_same(vmap(fused(family, case, *OPS, triton=True), in_dims=dims), vmap(reference(family, case), in_dims=dims),
                stacked)


def test_cuda_ops_on_a_random_graph_float32():
    """Thousands of rows in both buckets at the shipped block sizes (8 heads x 8 channels, as PubMed's GAT)."""
    g = torch.Generator().manual_seed(0)
    n, e, heads, c = 4000, 60_000, 8, 8
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.cat([torch.randint(0, n, (e - 3000,), generator=g), torch.randint(0, 3, (3000,), generator=g)])
    src, dst = src.cuda(), dst.cuda()
    orders = edge_orders(src, dst, n)
    for family in FAMILIES:
        case = dict(src=src, dst=dst, n=n, orders=orders)
        if family == "gatv2":
            shapes = dict(x_src=(n, heads, c), x_dst=(n, heads, c), values=(n, heads, c), att=(heads, c))
        else:
            shapes = dict(score_src=(n, heads), score_dst=(n, heads), bias=(e, heads), values=(n, heads, c))
        case["tensors"] = {k: torch.randn(s, generator=g).cuda().requires_grad_() for k, s in shapes.items()}
        # Hub rows of in-degree ~1000: float32 sums over them in another order differ by ~2e-5.
        assert_same(fused(family, case, *OPS, triton=True), reference(family, case), case["tensors"],
                    tol=dict(rtol=1e-4, atol=1e-4))


@pytest.mark.parametrize("name", ["gat", "gatv2", "gatdb"])
def test_models_on_cuda_compiled_equal_plain_and_cpu(name, monkeypatch):
    calls = []
    for op_name in ("gat_attention", "gatv2_attention"):
        original = getattr(ops, op_name)
        monkeypatch.setattr(ops, op_name, lambda *a, _o=original, **k: calls.append(1) or _o(*a, **k))
    edge_index, n = hub_graph(extra=EXTRA)
    x = torch.randn(n, 6, dtype=torch.float64)
    (cpu,) = seeded_double_models(name, seeds=(0,), heads=2)
    cpu(edge_index, x)  # GATDB: materialise the graph's biases
    gpu = copy.deepcopy(cpu).cuda()

    def run(compiled):
        with fused_switch(True, compiled=compiled):
            out = gpu(edge_index.cuda(), x.cuda())
            grads = torch.autograd.grad(out.square().sum(), list(gpu.parameters()))
        return (out,) + grads

    calls.clear()  # the CPU model's own forward above
    plain = run(False)
    assert not calls
    compiled = run(True)
    assert calls, "the compiled attention was not used on CUDA"
    for a, b in zip(compiled, plain):
        assert a.is_cuda
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    torch.testing.assert_close(compiled[0].cpu(), cpu(edge_index, x), rtol=0, atol=1e-9)

