"""A cache of values derived from constant input tensors (features that are the same tensor every
epoch), keyed by the tensor's identity and version and dropped with the tensor."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Generic, Optional, Tuple, TypeVar

from torch import Tensor

T = TypeVar("T")


class ConstantCache(Generic[T]):
    """``derive(x)``, computed once per constant tensor ``x`` (recomputed if ``x`` is modified in place)."""

    def __init__(self, derive: Callable[[Tensor], T]) -> None:
        self._derive = derive
        self._entries: Dict[int, Tuple[Any, int, T]] = {}

    def get(self, x: Tensor) -> T:
        hit = self._entries.get(id(x))
        if hit is not None and hit[0]() is x and hit[1] == x._version:
            return hit[2]
        return self.put(x, self._derive(x))

    def find(self, x: Tensor) -> Optional[T]:
        """The value recorded for ``x`` (as it is now), or ``None``; derives nothing."""
        hit = self._entries.get(id(x))
        return hit[2] if hit is not None and hit[0]() is x and hit[1] == x._version else None

    def put(self, x: Tensor, value: T) -> T:
        """Record ``value`` as ``derive(x)`` (a caller that built ``x`` knows it already)."""
        hit = self._entries.get(id(x))
        try:
            ref = weakref.ref(x)
        except TypeError:
            return value
        if hit is None:
            weakref.finalize(x, self._entries.pop, id(x), None)
        self._entries[id(x)] = (ref, x._version, value)
        return value


__all__ = ["ConstantCache"]
