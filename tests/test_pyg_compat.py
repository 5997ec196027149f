"""zoo/_pyg_compat.py: PyG's ``is_torch_instance`` without PyG's ``torch._dynamo`` import."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from zoo import _pyg_compat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _pyg_isinstance_path() -> str:
    spec = importlib.util.find_spec("torch_geometric")
    assert spec is not None and spec.submodule_search_locations
    return os.path.join(list(spec.submodule_search_locations)[0], "isinstance.py")


def test_the_installed_pyg_is_the_mirrored_source():
    # a new PyG: read its torch_geometric/isinstance.py; if is_torch_instance still means the same,
    # add the file's hash to MIRRORED_SHA256 (else the stand-in is off and PyG imports torch._dynamo)
    with open(_pyg_isinstance_path(), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    assert digest in _pyg_compat.MIRRORED_SHA256, digest


def test_the_finder_stands_in_only_for_the_mirrored_source(tmp_path):
    finder = _pyg_compat.PyGIsinstanceFinder()
    same, other = tmp_path / "same", tmp_path / "other"
    same.mkdir()
    other.mkdir()
    shutil.copy(_pyg_isinstance_path(), same / "isinstance.py")
    (other / "isinstance.py").write_text(open(_pyg_isinstance_path()).read() + "\n# changed\n")
    assert finder.find_spec(_pyg_compat.MODULE, [str(same)]) is not None
    assert finder.find_spec(_pyg_compat.MODULE, [str(other)]) is None  # PyG's own module then
    assert finder.find_spec(_pyg_compat.MODULE, [str(tmp_path / "missing")]) is None
    assert finder.find_spec("torch_geometric.typing", [str(same)]) is None


def test_pyg_imports_without_dynamo_and_answers_as_pyg_on_compiled_modules():
    out = _fresh(f"""
        import importlib.util, sys
        import zoo, torch
        import torch_geometric
        from torch_geometric.config_mixin import ConfigMixin  # PyG's own caller of is_torch_instance
        from zoo import _pyg_compat
        print("dynamo", "torch._dynamo" in sys.modules)
        assert torch_geometric.is_torch_instance is _pyg_compat.is_torch_instance
        assert torch_geometric.isinstance.is_torch_instance is _pyg_compat.is_torch_instance
        lin = torch.nn.Linear(2, 2)
        before = [torch_geometric.is_torch_instance(lin, torch.nn.Linear),
                  torch_geometric.is_torch_instance(lin, torch.nn.Conv1d)]
        compiled = torch.compile(lin)  # imports torch._dynamo; nothing is compiled before a call
        spec = importlib.util.spec_from_file_location("pyg_own_isinstance", {_pyg_isinstance_path()!r})
        own = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(own)
        cases = [(lin, torch.nn.Linear), (lin, torch.nn.Module), (lin, torch.nn.Conv1d),
                 (compiled, torch.nn.Linear), (compiled, (torch.nn.Conv1d, torch.nn.Linear)),
                 (compiled, torch.nn.Conv1d), (compiled, torch._dynamo.OptimizedModule), (3, int)]
        ours = [torch_geometric.is_torch_instance(o, c) for o, c in cases]
        assert ours == [own.is_torch_instance(o, c) for o, c in cases], ours
        print("answers", before, ours)
    """)
    assert "dynamo False" in out
    assert "answers [True, False] [True, True, False, True, True, False, False, True]" in out
