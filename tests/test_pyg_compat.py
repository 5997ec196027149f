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


def test_pyg_datasets_run_on_first_use_and_a_loader_skips_them():
    # the zoo's loaders import their dataset's own module: PyG's datasets package (with it
    # torch_geometric.llm and pandas) runs only when a name it defines is looked up
    out = _fresh("""
        import sys
        import zoo, zoo.cli, zoo.datasets, zoo.models
        import torch_geometric
        from zoo._pyg_compat import DATASET_MODULES, dataset_class
        classes = {name: dataset_class(name) for name in DATASET_MODULES}
        print("before", "pandas" in sys.modules, "torch_geometric.llm" in sys.modules)
        import torch_geometric.datasets as D
        assert all(getattr(D, name) is cls for name, cls in classes.items())
        from torch_geometric.datasets import KarateClub
        assert "KarateClub" in D.__all__ and D.KarateClub is KarateClub
        print("after", "torch_geometric.llm" in sys.modules)
    """)
    assert "before False False" in out
    assert "after True" in out


def test_the_lazy_package_runs_its_body_once_and_again_after_a_failure(tmp_path):
    pkg = tmp_path / "lazy_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import os\nRUNS = int(os.environ.get('LAZY_RUNS', '0')) + 1\n"
                                     "os.environ['LAZY_RUNS'] = str(RUNS)\nif os.environ.get('LAZY_FAIL'):\n"
                                     "    raise RuntimeError('body failed')\nfrom .part import VALUE\n")
    (pkg / "part.py").write_text("VALUE = 3\n")
    out = _fresh(f"""
        import os, sys
        sys.path.insert(0, {str(tmp_path)!r})
        from zoo import _pyg_compat
        _pyg_compat.LAZY_PACKAGE = "lazy_pkg"
        sys.meta_path.insert(0, _pyg_compat.LazyPackageFinder())
        import lazy_pkg
        import lazy_pkg.part  # a submodule by its full name: the body does not run
        assert lazy_pkg.part.VALUE == 3 and "LAZY_RUNS" not in os.environ
        assert not hasattr(lazy_pkg, "__wrapped__") and "LAZY_RUNS" not in os.environ  # a probe
        os.environ["LAZY_FAIL"] = "1"
        for _ in range(2):
            try:
                lazy_pkg.VALUE
            except RuntimeError as e:
                print("failed", e, os.environ["LAZY_RUNS"])
        del os.environ["LAZY_FAIL"]
        print("value", lazy_pkg.VALUE, lazy_pkg.RUNS, lazy_pkg.VALUE, os.environ["LAZY_RUNS"])
        try:
            lazy_pkg.missing
        except AttributeError as e:
            print("missing", os.environ["LAZY_RUNS"])
    """)
    assert "failed body failed 1" in out and "failed body failed 2" in out
    assert "value 3 3 3 3" in out and "missing 3" in out
