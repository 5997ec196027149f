"""PyG's ``torch_geometric.isinstance`` without its import of ``torch._dynamo``.

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
it): any other PyG keeps its own module.  Torch-free, and nothing is read at ``import zoo``.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional, Sequence, Tuple, Type, Union

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


def install() -> bool:
    """Put :class:`PyGIsinstanceFinder` first on ``sys.meta_path`` unless PyG's module is imported
    already; returns whether the finder is there."""
    if any(isinstance(f, PyGIsinstanceFinder) for f in sys.meta_path):
        return True
    if MODULE in sys.modules:
        return False
    sys.meta_path.insert(0, PyGIsinstanceFinder())
    return True


__all__ = ["install", "is_torch_instance", "mirrors", "PyGIsinstanceFinder", "MIRRORED_SHA256"]
