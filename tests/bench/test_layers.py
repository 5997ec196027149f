"""The layers of zoo.bench (issue 22): torch-free layers stay torch-free, old import paths still work."""
import importlib
import pkgutil
import subprocess
import sys

import pytest

import zoo.bench

TORCH_FREE = ("spec", "store", "analyze", "render")
OLD_PATHS = {  # old module -> a name it re-exports, and the module that now defines it
    "runner": ("run_suite", "zoo.bench.run.driver"), "records": ("append_record", "zoo.bench.store.records"),
    "suite": ("parse_suite", "zoo.bench.spec.suite"), "selection": ("parse_where", "zoo.bench.spec.selection"),
    "leaderboard": ("load_board", "zoo.bench.analyze.board"), "report": ("build_report", "zoo.bench.analyze.status"),
    "findings": ("evaluate", "zoo.bench.analyze.findings"), "html": ("to_html", "zoo.bench.render.html"),
    "train": ("train_replicas", "zoo.trainer.loop"), "optim": ("make_optimizer", "zoo.trainer.optim"),
    "executors": ("make_executor", "zoo.bench.run.executors"), "merge": ("merge", "zoo.bench.store.merge"),
    "stats": ("summarize", "zoo.bench.analyze.stats"),
}


@pytest.mark.parametrize("layer", TORCH_FREE)
def test_torch_free_layers_import_without_torch(layer):
    """Every module of spec/, store/, analyze/ and render/ imports in a fresh interpreter without torch."""
    code = (f"import importlib, pkgutil, sys, zoo.bench.{layer} as pkg\n"
            "for m in pkgutil.iter_modules(pkg.__path__):\n"
            "    importlib.import_module(f'{pkg.__name__}.{m.name}')\n"
            "bad = sorted(k for k in sys.modules if k == 'torch' or k.startswith('torch.'))\n"
            "assert not bad, bad[:3]\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_layer_modules_exist():
    """Each layer is a package with modules (a missing layer would make the torch-free check vacuous)."""
    for layer in (*TORCH_FREE, "run"):
        pkg = importlib.import_module(f"zoo.bench.{layer}")
        assert list(pkgutil.iter_modules(pkg.__path__)), layer


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_old_import_paths_reexport_the_new_modules(old):
    name, new = OLD_PATHS[old]
    stub = importlib.import_module(f"zoo.bench.{old}")
    assert getattr(stub, name) is getattr(importlib.import_module(new), name)
    assert "Old import path" in stub.__doc__


def test_package_api_is_kept():
    for name in zoo.bench.__all__:
        assert getattr(zoo.bench, name) is not None
    with pytest.raises(AttributeError):
        zoo.bench.no_such_name  # noqa: B018


def test_zoo_build_stays_the_function_after_a_spec_lookup():
    """``zoo`` loads lazily; a suite check that builds a model must not rebind ``zoo.build`` to its module."""
    code = ("import zoo.bench.spec.plugins as p, zoo\n"
            "p.try_build('gat', 'none', None, {'num_layers': 2})\n"
            "import zoo.build\n"
            "assert callable(zoo.build), zoo.build\n"
            "assert type(zoo.build('gat', in_dim=3, out_dim=2)).__name__ == 'GAT'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
