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
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import FrozenSet, Iterable, Iterator, Optional, Union

#: The environment variable read at import.
FUSED_ENV = "ZOO_FUSED"
#: The kernels the switch names.
KERNELS = ("score", "aggregate")

#: Unbatched (one replica), graphs with fewer ``E * heads * channels`` edge-tensor elements than
#: this keep the plain path: fused/plain fwd+bwd per layer measured 1.02-1.14 on Cornell
#: (~650 edges x 64), 0.61-0.94 on Cora (13k x 64); under vmap the fused op always won (0.2-0.7).
#: (GATv2's fused score: on Cornell, one replica, fused/plain per layer 0.81-1.21 — the
#: autograd.Function's own cost eats the saving.)
FUSED_MIN_ELEMENTS = 2 ** 18

Choice = Union[bool, str, Iterable[str]]

_ALL = frozenset(KERNELS)
_WORDS = {"1": _ALL, "on": _ALL, "true": _ALL, "all": _ALL, "yes": _ALL,
          "0": frozenset(), "off": frozenset(), "false": frozenset(), "none": frozenset(), "no": frozenset(),
          "plain": frozenset()}


@dataclass(frozen=True)
class FusedConfig:
    """Which fused kernels the dispatch may use, and the size below which one replica stays plain."""

    kernels: FrozenSet[str] = _ALL
    min_elements: int = FUSED_MIN_ELEMENTS

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
    if value is None or not value.strip():
        return FusedConfig()
    return FusedConfig(parse_kernels(value, source=f"environment variable {FUSED_ENV}={value!r}"))


_config = _from_env()


def use_fused() -> FusedConfig:
    """The current switch (the dispatch reads it once per call)."""
    return _config


def set_fused(enabled: Choice = True, *, min_elements: Optional[int] = None) -> FusedConfig:
    """Switch the fused kernels for the whole process; returns the previous setting.

    ``enabled``: ``True`` (all), ``False`` (none), ``"score"``, ``"aggregate"`` or a list of them.
    ``min_elements``: the ``E * heads * channels`` size from which a single replica uses a fused
    kernel (default :data:`FUSED_MIN_ELEMENTS`; ``0`` fuses every graph — tests and benchmarks).
    """
    global _config
    previous = _config
    threshold = FUSED_MIN_ELEMENTS if min_elements is None else int(min_elements)
    if threshold < 0:
        raise ValueError(f"set_fused: min_elements must be >= 0, got {min_elements!r}")
    _config = FusedConfig(parse_kernels(enabled), threshold)
    return previous


def restore(config: FusedConfig) -> None:
    """Put back a setting returned by :func:`set_fused` / :func:`use_fused`."""
    global _config
    if not isinstance(config, FusedConfig):
        raise TypeError(f"restore: expected a FusedConfig (from set_fused or use_fused), got {config!r}")
    _config = config


@contextmanager
def fused(enabled: Choice = True, *, min_elements: Optional[int] = None) -> Iterator[FusedConfig]:
    """:func:`set_fused` for a ``with`` block; the previous setting comes back on exit (also on errors)."""
    previous = set_fused(enabled, min_elements=min_elements)
    try:
        yield _config
    finally:
        restore(previous)


__all__ = ["FUSED_ENV", "FUSED_MIN_ELEMENTS", "KERNELS", "FusedConfig", "fused", "parse_kernels", "restore",
           "set_fused", "use_fused"]
