"""The zoo's custom ops import ``torch._dynamo`` only once something else has (zoo/ops/_custom.py,
``defer_dynamo``), and run under dynamo's ``disable`` from then on, as torch's own wrapper does."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from zoo.ops._custom import HAS_CUSTOM_OPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not HAS_CUSTOM_OPS, reason="torch < 2.4: no custom ops")


def _fresh(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_a_stacked_sparse_first_layer_trains_without_importing_dynamo():
    # the first layer of a bag-of-words model under vmap: the zoo::csr_linear custom op, forward and backward;
    # zoo.datasets imports PyG (zoo/_pyg_compat.py keeps its torch._dynamo import off too)
    out = _fresh("""
        import sys, torch
        import zoo.datasets
        from zoo.ops.sparse_linear import linear
        torch.manual_seed(0)
        x = (torch.rand(60, 500) < 0.03).float()
        w = torch.randn(3, 8, 500, requires_grad=True)
        out = torch.func.vmap(lambda w: linear(x, w))(w)
        out.square().sum().backward()
        assert torch.allclose(out, torch.einsum("nf,rcf->rnc", x, w.detach()), atol=1e-5)
        print("dynamo", "torch._dynamo" in sys.modules, "sympy", "sympy" in sys.modules)
    """)
    assert "dynamo False sympy False" in out


def test_once_dynamo_is_imported_the_ops_run_under_its_disable_and_compile():
    out = _fresh("""
        import sys, torch
        from zoo.ops import segment
        op = segment._gather_rows
        raw = op._backend_fns[None].__wrapped__  # the kernel torch wraps in torch._disable_dynamo
        x, index = torch.randn(5, 3), torch.tensor([0, 2, 2, 4])
        eager = op(x, index, 0)
        print("deferred", "torch._dynamo" not in sys.modules, raw.__dynamo_disable.__qualname__)
        import torch._dynamo
        assert torch.equal(op(x, index, 0), eager)
        print("handed over", "_until_dynamo" not in raw.__dynamo_disable.__qualname__)
        compiled = torch.compile(lambda t: segment._gather_rows(t, index, 0) * 2, backend="eager", fullgraph=True)
        print("compiled", torch.equal(compiled(x), eager * 2))
    """)
    assert "deferred True _until_dynamo.<locals>.call" in out
    assert "handed over True" in out
    assert "compiled True" in out
