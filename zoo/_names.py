"""Name normalisation and a small typed registry shared by models, inits, norms and suites.

Names are compared after normalisation (``"Bal-O"``, ``"bal o"`` and ``"BAL_O"`` are one
name), and an unknown name is answered with its closest matches and the full list of
choices, so a typo costs one glance at the error rather than a trip to the docs.
"""
from __future__ import annotations

import difflib
import functools
import re
import warnings
from typing import Any, Callable, Dict, Generic, Iterable, Iterator, List, Optional, TypeVar

T = TypeVar("T")

_SEPARATORS = re.compile(r"[\s\-]+")


def normalize_name(name: str) -> str:
    """Lower-case ``name`` and map spaces and dashes to underscores."""
    if not isinstance(name, str):
        raise TypeError(f"expected a name (str), got {type(name).__name__}: {name!r}")
    return _normalized(name)


@functools.lru_cache(maxsize=4096)
def _normalized(name: str) -> str:
    # Cached: building the report normalises the same few hundred names over a million times.
    return _SEPARATORS.sub("_", name.strip()).lower()


def close_matches(name: str, choices: Iterable[str], n: int = 3) -> List[str]:
    choices = list(choices)
    key = normalize_name(name)
    found = difflib.get_close_matches(key, choices, n=n, cutoff=0.5)
    # Prefix matches catch abbreviations that difflib scores low ("gat" -> "gatv2").
    found += [c for c in choices if c.startswith(key) and c not in found]
    return found[:n]


def unknown_name_error(kind: str, name: str, choices: Iterable[str], hint: str = "") -> ValueError:
    """A ``ValueError`` that names the unknown ``name``, its near matches and every valid choice."""
    choices = sorted(set(choices))
    near = close_matches(name, choices)
    msg = f"unknown {kind} {name!r}."
    if near:
        msg += f" Did you mean {' or '.join(repr(c) for c in near)}?"
    msg += f" Valid {kind}s: {', '.join(choices) if choices else '(none registered)'}."
    if hint:
        msg += f" {hint}"
    return ValueError(msg)


def unknown_kwargs_error(owner: str, unknown: Iterable[str], valid: Iterable[str]) -> TypeError:
    """A ``TypeError`` for unexpected keyword arguments, with near matches for each."""
    valid = sorted(set(valid))
    parts = []
    for key in sorted(unknown):
        near = difflib.get_close_matches(key, valid, n=2, cutoff=0.6)
        parts.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""))
    return TypeError(
        f"{owner} got unexpected option(s) {', '.join(parts)}. Valid options: {', '.join(valid)}."
    )


def definition(obj: Any) -> tuple:
    """Where ``obj`` was defined: ``(module, qualified name)`` (a registry's default identity)."""
    return (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None) or type(obj).__qualname__)


class Registry(Generic[T]):
    """A name -> object map with normalised names, aliases and helpful errors.

    Registering a taken name (or alias) for *another* plugin raises, so two plugins can never
    shadow each other; the *same* definition registered again (a notebook cell run twice: same
    module and qualified name, as ``identity`` reads them) replaces the old one with a warning.
    ``populate``, if given, is called once before the first lookup: it imports the modules that
    register the entries, so a registry read before its plugins were imported (``import
    zoo.registry`` alone) is still complete.
    """

    def __init__(self, kind: str, populate: Optional[Callable[[], None]] = None,
                 identity: Optional[Callable[[T], Any]] = None) -> None:
        self.kind = kind
        self._items: Dict[str, T] = {}
        self._aliases: Dict[str, str] = {}
        self._populate = populate
        self._identity = identity or definition

    def _populated(self) -> None:
        populate, self._populate = self._populate, None  # once; registering inside it must not recurse
        if populate is not None:
            populate()

    def add(self, name: str, item: T, aliases: Iterable[str] = ()) -> T:
        key = normalize_name(name)
        aliases = tuple(aliases)
        if key in self._items and self._identity(self._items[key]) == self._identity(item):
            warnings.warn(f"{self.kind} {key!r} was registered already by the same definition "
                          f"({'.'.join(map(str, self._identity(item)))}); replacing it", UserWarning, stacklevel=3)
            self._aliases = {a: k for a, k in self._aliases.items() if k != key}
            del self._items[key]
        for k in (key, *map(normalize_name, aliases)):
            if k in self._items or k in self._aliases:
                raise ValueError(f"{self.kind} {k!r} is already registered; pick another name.")
        self._items[key] = item
        for alias in aliases:
            self._aliases[normalize_name(alias)] = key
        return item

    def canonical(self, name: str) -> str:
        self._populated()
        key = normalize_name(name)
        key = self._aliases.get(key, key)
        if key not in self._items:
            raise unknown_name_error(self.kind, name, [*self._items, *self._aliases])
        return key

    def get(self, name: str) -> T:
        return self._items[self.canonical(name)]

    def __contains__(self, name: object) -> bool:
        self._populated()
        if not isinstance(name, str):
            return False
        key = normalize_name(name)
        return key in self._items or key in self._aliases

    def names(self) -> List[str]:
        self._populated()
        return sorted(self._items)

    def aliases(self, name: Optional[str] = None) -> Dict[str, str]:
        self._populated()
        if name is None:
            return dict(self._aliases)
        key = self.canonical(name)
        return {a: k for a, k in self._aliases.items() if k == key}

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._populated()
        return len(self._items)
