"""Which data a run used: a hash over the tensors' bytes, and a seal telling whether a loaded task
was changed after :func:`zoo.datasets.load` made it.

A cell's id hashes its configuration; a task made by a recipe (dataset, split, seed, transforms,
options) is identified by that recipe only while its data is the recipe's.  :func:`task_fingerprint`
hashes what a task holds (every tensor of its graph(s), its classes, kind and metric); each tensor's
digest is cached per tensor *version* (PyTorch bumps ``tensor._version`` on every in-place change), so
asking again after no change costs a dictionary lookup, and ``x += 1`` or ``x.zero_()`` is seen.
:class:`Seal` remembers the tensor objects and versions a task was made with: an unbroken seal means
the data is the recipe's without hashing anything.  (Writes that bypass PyTorch, e.g. through
``tensor.numpy()``, bump no version: such edits are not seen.)
"""
from __future__ import annotations

import hashlib
import pickle
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch import Tensor

#: id(tensor) -> (weak reference, state when hashed, digest)
_DIGESTS: Dict[int, Tuple["weakref.ReferenceType[Tensor]", Tuple[Any, ...], str]] = {}


def _state(t: Tensor) -> Optional[Tuple[Any, ...]]:
    """What must be unchanged for a cached digest to hold (``None``: cannot tell, hash every time)."""
    if t.is_inference() or t.layout != torch.strided:
        return None  # inference tensors keep no version counter; sparse ones have no single storage
    return t._version, t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device


def _hash_bytes(t: Tensor) -> str:
    h = hashlib.sha1()
    if t.layout != torch.strided:
        t = t.coalesce() if t.layout == torch.sparse_coo else t.to_sparse_coo().coalesce()
        h.update(f"sparse{tuple(t.shape)}".encode())
        for part in (t.indices(), t.values()):
            h.update(_hash_bytes(part).encode())
        return h.hexdigest()
    t = t.detach().cpu().contiguous()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool
                 else t.to(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _forget(key: int, ref: "weakref.ReferenceType[Tensor]") -> None:
    entry = _DIGESTS.get(key)
    if entry is not None and entry[0] is ref:
        del _DIGESTS[key]


def tensor_digest(t: Tensor) -> str:
    """sha1 of ``t``'s dtype, shape and bytes; cached until ``t`` changes (its version moves)."""
    state = _state(t)
    if state is None:
        return _hash_bytes(t)
    key = id(t)
    entry = _DIGESTS.get(key)
    if entry is not None and entry[0]() is t and entry[1] == state:
        return entry[2]
    digest = _hash_bytes(t)
    ref = weakref.ref(t, lambda r, k=key: _forget(k, r))
    _DIGESTS[key] = (ref, state, digest)
    return digest


def _value_digest(value: Any) -> str:
    if isinstance(value, Tensor):
        return tensor_digest(value)
    if hasattr(value, "to_torch_sparse_coo_tensor"):  # torch_sparse.SparseTensor
        return tensor_digest(value.to_torch_sparse_coo_tensor())
    return repr(value)


def _graphs(task: Any) -> Iterator[Tuple[str, Any]]:
    if task.data is not None:
        yield "data", task.data
        return
    for split, graphs in sorted(task.graphs.items()):
        for i, g in enumerate(graphs):
            yield f"{split}[{i}]", g


def task_fingerprint(task: Any) -> str:
    """sha1 (16 hex digits) of ``task``'s kind, metric, classes and every value of its graph(s): equal
    data, equal fingerprint; any edit (a tensor replaced, changed in place, a mask redrawn) another."""
    h = hashlib.sha1()
    for key in ("kind", "metric", "num_classes", "multilabel"):
        h.update(f"{key}={getattr(task, key)!r};".encode())
    for where, g in _graphs(task):
        for key in sorted(g.keys()):
            h.update(f"{where}.{key}={_value_digest(g[key])};".encode())
    return h.hexdigest()[:16]


def weights_fingerprint(module: torch.nn.Module) -> str:
    """sha1 (16 hex digits) of a model's parameters and buffers by name (cached per tensor version)."""
    h = hashlib.sha1()
    for name, t in sorted(module.state_dict(keep_vars=True).items()):
        h.update(f"{name}={tensor_digest(t.detach() if t.requires_grad else t)};".encode())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- the seal of a loaded task


def _values(g: Any) -> List[Any]:
    out: List[Any] = []
    for key in sorted(g.keys()):
        out += [key, g[key]]
    return out


def _held(task: Any) -> List[Any]:
    """Every object whose identity makes ``task``'s data: containers, graphs and their values
    (a graph set generated on demand is identified by its generator object)."""
    if task.data is not None:
        return [task.data, *_values(task.data)]
    out: List[Any] = [task.graphs]
    for split, graphs in sorted(task.graphs.items()):
        out += [split, graphs]
        if isinstance(graphs, (list, tuple)):
            for g in graphs:
                out += [g, *_values(g)]
    return out


_FIELDS = ("kind", "metric", "num_classes", "multilabel")


class Seal:
    """The objects (and tensor versions) of a task as :func:`zoo.datasets.load` made it.

    ``intact(task)``: the task still holds exactly those objects, none changed in place.  ``reload()``
    makes the recipe's task again, to compare contents when the seal is broken.
    """

    def __init__(self, task: Any, reload: Callable[[], Any]) -> None:
        self.reload: Optional[Callable[[], Any]] = reload
        self._fields = tuple(getattr(task, k) for k in _FIELDS)
        self._objects: Optional[List[Any]] = _held(task)  # strong references: no id is reused while held
        self._versions = [_state(o)[0] if isinstance(o, Tensor) and _state(o) is not None else None
                          for o in self._objects]

    def intact(self, task: Any) -> bool:
        if self._objects is None or tuple(getattr(task, k) for k in _FIELDS) != self._fields:
            return False
        now = _held(task)
        if len(now) != len(self._objects):
            return False
        for old, new, version in zip(self._objects, now, self._versions):
            if isinstance(old, Tensor):
                if old is not new or version is None or new._version != version:
                    return False  # replaced, changed in place, or a tensor without a version counter
            elif isinstance(old, (str, int, float, bool, type(None))):
                if type(old) is not type(new) or old != new:
                    return False
            elif old is not new:
                return False
        return True

    def __getstate__(self) -> Dict[str, Any]:
        """A pickled task keeps its recipe, not the objects: its copy is compared by content (a recipe
        with a callable transform may not pickle: then the copy cannot be compared, ``reload`` is None)."""
        reload: Optional[Callable[[], Any]] = self.reload
        try:
            pickle.dumps(reload)
        except Exception:  # noqa: BLE001 - a lambda transform and the like
            reload = None
        return {"reload": reload, "_fields": self._fields, "_objects": None, "_versions": []}


# --------------------------------------------------------------------------- registered datasets


def is_builtin(spec: Any) -> bool:
    """Whether a dataset card is one of the zoo's own (its data comes from its recipe and the
    checksummed mirror) rather than registered by a user, whose loader may return anything."""
    return str(getattr(spec.loader, "__module__", "") or "").split(".")[0] == "zoo"
