"""PyG without two of its eager imports: ``torch._dynamo``, and every dataset class with their dependencies.

**``torch_geometric.isinstance``.**
``import torch_geometric`` imports every PyG subpackage, and its ``isinstance`` module imports
``torch._dynamo`` (with sympy and the compiler's modules) only to name ``OptimizedModule``, the
wrapper class of ``torch.compile``d modules, for ``is_torch_instance``.  That import is the larger
part of ``import torch_geometric``, and a zoo process that compiles nothing never needs it
(docs/notes/performance.md, "The Cornell process without torch._dynamo").

:func:`install` (run by ``import zoo``) puts a finder first on ``sys.meta_path`` that loads
``torch_geometric.isinstance``, when PyG imports it, as a module whose :func:`is_torch_instance`
gives PyG's answer without the import: an ``OptimizedModule`` can exist only once
``torch._dynamo.eval_frame`` (which defines the class) is imported, so while it is not no object is
one, and once it is the test is PyG's own.  The finder stands in only for the PyG source it was
written against (:data:`MIRRORED_SHA256`, the hash of PyG's ``isinstance.py``, read when PyG imports
it): any other PyG keeps its own module.

**``torch_geometric.datasets``, loaded on first use.**  ``import torch_geometric`` also imports
``torch_geometric.datasets``, whose ``__init__`` imports its ~120 dataset modules and with them
``torch_geometric.llm`` (pandas, requests, tqdm...): ~600 modules and a third of a second of CPU that a
process training on one cached dataset does not need (docs/notes/performance.md, "The Cornell process,
session 7").  :class:`LazyPackageFinder` (also put on ``sys.meta_path`` by :func:`install`) gives that
package its module with its path, file and spec as usual but runs its ``__init__`` only at the first
lookup of a name the body defines (``torch_geometric.datasets.Planetoid``, ``from torch_geometric.datasets
import Planetoid``, its ``__all__``): the body, not a copy of it, so every PyG version behaves as its
own.  A submodule imported by its full name (:func:`dataset_class`, ``import
torch_geometric.datasets.webkb``) does not run it.  Torch-free, and nothing is read at ``import zoo``.
"""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Dict, Optional, Sequence, Tuple, Type, Union

MODULE = "torch_geometric.isinstance"
#: sha256 of the ``torch_geometric/isinstance.py`` whose behaviour :func:`is_torch_instance` reproduces (PyG 2.8.1)
MIRRORED_SHA256 = frozenset({"b6bb998dd53d3f14af8c9ea4d1dfc22c9da23a97a7da8f14fb9e296d46cd4721"})


def is_torch_instance(obj: Any, cls: Union[Type, Tuple[Type, ...]]) -> bool:
    """``isinstance(obj, cls)``, looking through ``torch.compile``'s wrapper to the compiled module
    (PyG's function: a compiled model passes as its original class)."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    optimized = getattr(eval_frame, "OptimizedModule", None)
    if optimized is not None and isinstance(obj, optimized):
        return isinstance(obj._orig_mod, cls)
    return isinstance(obj, cls)


def mirrors(path: str) -> bool:
    """Whether the file at ``path`` is the PyG source this module reproduces."""
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest() in MIRRORED_SHA256
    except OSError:
        return False


class _Loader:
    """Executes a ``torch_geometric.isinstance`` module as this module's stand-in."""

    def create_module(self, spec: Any) -> None:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        module.__doc__ = __doc__
        module.is_torch_instance = is_torch_instance


class PyGIsinstanceFinder:
    """The ``sys.meta_path`` finder of :func:`install`: finds ``torch_geometric.isinstance`` (when its
    PyG source is the mirrored one) and nothing else."""

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name != MODULE or not path:
            return None
        source = os.path.join(list(path)[0], "isinstance.py")
        if not mirrors(source):
            return None
        import importlib.util

        return importlib.util.spec_from_loader(name, _Loader(), origin=source)


#: the package whose ``__init__`` runs on first use (:class:`LazyPackageFinder`)
LAZY_PACKAGE = "torch_geometric.datasets"
#: the PyG dataset classes the zoo's loaders use -> their module in :data:`LAZY_PACKAGE`
DATASET_MODULES: Dict[str, str] = {
    "Actor": "actor", "Amazon": "amazon", "CitationFull": "citation_full", "Coauthor": "coauthor",
    "HeterophilousGraphDataset": "heterophilous_graph_dataset", "Planetoid": "planetoid", "PPI": "ppi",
    "WebKB": "webkb", "WikipediaNetwork": "wikipedia_network",
}


def dataset_class(name: str) -> Type:
    """PyG's dataset class ``torch_geometric.datasets.<name>``, imported from its own module where
    :data:`DATASET_MODULES` knows it (the package's ``__init__``, every dataset, is not run for it)."""
    module = DATASET_MODULES.get(name)
    if module is None:
        return getattr(importlib.import_module(LAZY_PACKAGE), name)
    return getattr(importlib.import_module(f"{LAZY_PACKAGE}.{module}"), name)


class _LazyPackageLoader:
    """Makes the package's module at once (path, file, spec: its submodules import as usual) and runs
    its body with ``real`` at the first lookup of a name the module lacks (a module ``__getattr__``,
    removed before the body runs, so the body's own lookups and every later one are plain)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.body_run = False

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        if self.body_run:  # importlib.reload: run the body again
            self.real.exec_module(module)
            return

        def __getattr__(name: str) -> Any:
            # dunders other than __all__ are probes (inspect, pickle, doctest...): the body defines none
            if name.startswith("__") and name.endswith("__") and name != "__all__":
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            run = vars(module).pop("__getattr__", None)
            if run is None:  # the body is running and looked up a name it has not defined yet
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            try:
                self.body_run = True
                self.real.exec_module(module)
            except BaseException:
                self.body_run = False
                module.__getattr__ = run  # the next lookup runs it again (and raises its error again)
                raise
            return getattr(module, name)

        module.__getattr__ = __getattr__


class LazyPackageFinder:
    """The ``sys.meta_path`` finder of :func:`install` for :data:`LAZY_PACKAGE`: the path finder's spec
    of that package, its loader wrapped in :class:`_LazyPackageLoader`; nothing else."""

    def find_spec(self, name: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if name != LAZY_PACKAGE:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.submodule_search_locations or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _LazyPackageLoader(spec.loader)
        return spec


def install() -> bool:
    """Put :class:`PyGIsinstanceFinder` and :class:`LazyPackageFinder` first on ``sys.meta_path``,
    each unless its module is imported already; returns whether the isinstance finder is there."""
    if LAZY_PACKAGE not in sys.modules and not any(isinstance(f, LazyPackageFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LazyPackageFinder())
    if any(isinstance(f, PyGIsinstanceFinder) for f in sys.meta_path):
        return True
    if MODULE in sys.modules:
        return False
    sys.meta_path.insert(0, PyGIsinstanceFinder())
    return True


__all__ = ["install", "is_torch_instance", "mirrors", "PyGIsinstanceFinder", "MIRRORED_SHA256", "LazyPackageFinder",
           "LAZY_PACKAGE", "DATASET_MODULES", "dataset_class"]
