"""The one switch for the fused edge kernels (as timm's ``layers/config.py``).

Two kernels can be switched: ``"score"`` (the attention score as one op with its own backward:
:func:`zoo.ops.score.gatv2_score`, :func:`zoo.ops.score.gat_edge_scores` and GAT's
:func:`zoo.ops.message.node_scores`) and ``"aggregate"`` (softmax + weighted aggregation as
sparse products: :func:`zoo.ops.aggregate.edge_attention`).  :mod:`zoo.ops.dispatch` reads the
switch once per call; the layers never read it.

>>> zoo.ops.set_fused(False)              # plain autograd ops everywhere
>>> with zoo.ops.fused("aggregate"):      # only the fused aggregation, restored on exit
...     model(graph, x)
>>> with zoo.ops.fused(True, min_elements=0):   # tests: fuse even tiny graphs

The environment variable ``ZOO_FUSED`` (read once, at import) sets the starting value:
``0``/``off``/``none`` (plain), ``1``/``on``/``all`` (default), ``score`` or ``aggregate``.

With both kernels on, the dispatch uses the *compiled* attention (score + softmax + aggregation
in one C++ / Triton op, :mod:`zoo.ops._compiled`) where it serves the device, for graphs of any
size.  ``compiled=False`` — or the environment variable ``ZOO_KERNELS=off``, read whenever a
setting is made — keeps the torch-op kernels above.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import FrozenSet, Iterable, Iterator, Optional, Union

from zoo.ops._compiled.build import kernels_disabled

#: The environment variable read at import.
FUSED_ENV = "ZOO_FUSED"
#: The kernels the switch names.
KERNELS = ("score", "aggregate")

#: Unbatched (one replica), graphs with fewer ``E * heads * channels`` edge-tensor elements than
#: this keep the plain path: below it the autograd.Function's own cost eats what fusing saves
#: (Cornell-size graphs), above it (Cora-size) and under vmap at every size the fused op wins
#: (figures: docs/notes/performance.md, "Dispatch thresholds").
FUSED_MIN_ELEMENTS = 2 ** 18

Choice = Union[bool, str, Iterable[str]]

_ALL = frozenset(KERNELS)
_WORDS = {"1": _ALL, "on": _ALL, "true": _ALL, "all": _ALL, "yes": _ALL,
          "0": frozenset(), "off": frozenset(), "false": frozenset(), "none": frozenset(), "no": frozenset(),
          "plain": frozenset()}


@dataclass(frozen=True)
class FusedConfig:
    """Which fused kernels the dispatch may use, the size below which one replica stays plain (the
    torch-op kernels only), and whether the compiled attention may replace both kernels."""

    kernels: FrozenSet[str] = _ALL
    min_elements: int = FUSED_MIN_ELEMENTS
    compiled: bool = True

    @property
    def use_compiled(self) -> bool:
        """The compiled attention is on: both kernels and ``compiled`` (device support aside)."""
        return self.compiled and self.score and self.aggregate

    @property
    def score(self) -> bool:
        return "score" in self.kernels

    @property
    def aggregate(self) -> bool:
        return "aggregate" in self.kernels


def parse_kernels(choice: Choice, *, source: str = "set_fused") -> FrozenSet[str]:
    """``True``/``False``, a word (``"on"``, ``"off"``, ``"score"``, ``"aggregate"``, ``"score,aggregate"``)
    or an iterable of kernel names -> the set of enabled kernels."""
    if isinstance(choice, bool):
        return _ALL if choice else frozenset()
    if isinstance(choice, str):
        word = choice.strip().lower()
        if word in _WORDS:
            return _WORDS[word]
        choice = [part.strip() for part in word.split(",") if part.strip()]
    try:
        names = frozenset(str(part).lower() for part in choice)
    except TypeError:
        raise TypeError(f"{source}: expected True, False, a kernel name or a list of them, got {choice!r}") from None
    unknown = sorted(names - _ALL)
    if unknown:
        raise ValueError(f"{source}: unknown fused kernel(s) {unknown}; choose from {list(KERNELS)}, "
                         "True (all) or False (none)")
    return names


def _from_env() -> FusedConfig:
    value = os.environ.get(FUSED_ENV)
    compiled = not kernels_disabled()
    if value is None or not value.strip():
        return FusedConfig(compiled=compiled)
    return FusedConfig(parse_kernels(value, source=f"environment variable {FUSED_ENV}={value!r}"), compiled=compiled)


_config = _from_env()


def use_fused() -> FusedConfig:
    """The current switch (the dispatch reads it once per call)."""
    return _config


def set_fused(enabled: Choice = True, *, min_elements: Optional[int] = None,
              compiled: Optional[bool] = None) -> FusedConfig:
    """Switch the fused kernels for the whole process; returns the previous setting.

    ``enabled``: ``True`` (all), ``False`` (none), ``"score"``, ``"aggregate"`` or a list of them.
    ``min_elements``: the ``E * heads * channels`` size from which a single replica uses a fused
    kernel (default :data:`FUSED_MIN_ELEMENTS`; ``0`` fuses every graph — tests and benchmarks).
    ``compiled``: whether the compiled attention may be used (default: unless ``ZOO_KERNELS=off``).
    """
    global _config
    previous = _config
    threshold = FUSED_MIN_ELEMENTS if min_elements is None else int(min_elements)
    if threshold < 0:
        raise ValueError(f"set_fused: min_elements must be >= 0, got {min_elements!r}")
    _config = FusedConfig(parse_kernels(enabled), threshold, not kernels_disabled() if compiled is None else compiled)
    return previous


def restore(config: FusedConfig) -> None:
    """Put back a setting returned by :func:`set_fused` / :func:`use_fused`."""
    global _config
    if not isinstance(config, FusedConfig):
        raise TypeError(f"restore: expected a FusedConfig (from set_fused or use_fused), got {config!r}")
    _config = config


@contextmanager
def fused(enabled: Choice = True, *, min_elements: Optional[int] = None,
          compiled: Optional[bool] = None) -> Iterator[FusedConfig]:
    """:func:`set_fused` for a ``with`` block; the previous setting comes back on exit (also on errors)."""
    previous = set_fused(enabled, min_elements=min_elements, compiled=compiled)
    try:
        yield _config
    finally:
        restore(previous)


__all__ = ["FUSED_ENV", "FUSED_MIN_ELEMENTS", "KERNELS", "FusedConfig", "fused", "parse_kernels", "restore",
           "set_fused", "use_fused"]
