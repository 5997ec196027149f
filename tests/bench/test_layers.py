"""The layers of zoo.bench as packages: each exists with modules, the old flat import paths are gone, the
package's lazy API resolves."""
import importlib
import pkgutil
import subprocess
import sys

import pytest

import zoo.bench

LAYERS = ("suite", "plan", "store", "run", "analyze", "report", "render")
#: the modules of the flat zoo.bench (and of zoo.nn's edge primitives) before the layers, and the
#: ``spec`` layer before it became ``suite`` and ``plan``, the modules named "checkpoint" (now
#: ``zoo.model_file`` and ``zoo.bench.run.resume_file``), and the reproduction page's rules that sat in
#: ``analyze`` before they became the ``report`` layer: removed, not kept as shims
REMOVED = ("zoo.bench.executors", "zoo.bench.findings", "zoo.bench.html", "zoo.bench.leaderboard", "zoo.bench.merge",
           "zoo.bench.optim", "zoo.bench.records", "zoo.bench.runner", "zoo.bench.selection",
           "zoo.bench.stats", "zoo.bench.train", "zoo.nn.fused", "zoo.nn.fused_score", "zoo.nn.functional",
           "zoo.bench.spec", "zoo.bench.spec.suite", "zoo.bench.suite.suite", "zoo.bench.analyze.search",
           "zoo.checkpoint", "zoo.bench.run.checkpoint",
           *(f"zoo.bench.analyze.{m}" for m in ("agreement", "findings", "missing_cost", "note_figures", "readings",
                                               "status", "todo")))


def test_layer_modules_exist():
    """Each layer is a package with modules (a missing layer would make the torch-free check of
    tests/test_layering.py vacuous)."""
    for layer in LAYERS:
        pkg = importlib.import_module(f"zoo.bench.{layer}")
        assert list(pkgutil.iter_modules(pkg.__path__)), layer


@pytest.mark.parametrize("old", REMOVED)
def test_old_import_paths_are_gone(old):
    """No deprecated shims: a caller of an old path fails at import, not on a re-export that drifts."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_package_api_is_kept():
    for name in zoo.bench.__all__:
        assert getattr(zoo.bench, name) is not None
    with pytest.raises(AttributeError):
        zoo.bench.no_such_name  # noqa: B018


def test_zoo_build_stays_the_function_after_a_suite_check():
    """``zoo`` loads lazily; a suite check that builds a model must not rebind ``zoo.build`` to its module."""
    code = ("import zoo.bench.suite.plugins as p, zoo\n"
            "p.try_build('gat', 'none', None, {'num_layers': 2})\n"
            "import zoo.build\n"
            "assert callable(zoo.build), zoo.build\n"
            "assert type(zoo.build('gat', in_dim=3, out_dim=2)).__name__ == 'GAT'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
