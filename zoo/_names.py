"""Name normalisation, the one option check and the typed registry every plugin kind uses (models,
inits, norms, encoders, heads, readouts, transforms, datasets).

Names are compared after normalisation (``"Bal-O"``, ``"bal o"`` and ``"BAL_O"`` are one
name), and an unknown name is answered with its closest matches and the full list of
choices, so a typo costs one glance at the error rather than a trip to the docs.  A plugin is
made with :meth:`Registry.create`: its options are checked once, here (:func:`check_options`:
names against what the plugin accepts, values against the types of its defaults), so every kind
of plugin refuses a bad option with the same one line.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import re
import warnings
from typing import Any, Callable, Dict, Generic, Iterable, Iterator, List, Mapping, Optional, Sequence, TypeVar

T = TypeVar("T")

_SEPARATORS = re.compile(r"[\s\-]+")


def normalize_name(name: str) -> str:
    """Lower-case ``name`` and map spaces and dashes to underscores."""
    if not isinstance(name, str):
        raise TypeError(f"expected a name (str), got {type(name).__name__}: {name!r}")
    return _normalized(name)


@functools.lru_cache(maxsize=4096)
def choice(option: str, value: str, choices: Sequence[str]) -> str:
    """``value`` as a name (:func:`normalize_name`) when it is one of ``choices``; otherwise one line naming them."""
    name = normalize_name(value)
    if name not in choices:
        raise ValueError(f"{option} must be one of {choices}, got {name!r}")
    return name


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


def unknown_kwargs_error(owner: str, unknown: Iterable[str], valid: Iterable[str],
                         elsewhere: Optional[Mapping[str, List[str]]] = None) -> TypeError:
    """A ``TypeError`` for unexpected keyword arguments: for each, the plugins of the same kind that
    take it (``elsewhere``: option -> their names), else its near matches."""
    valid = sorted(set(valid))
    elsewhere = elsewhere or {}
    parts = []
    for key in sorted(unknown):
        if elsewhere.get(key):
            parts.append(f"{key!r} (an option of {', '.join(elsewhere[key])})")
            continue
        near = difflib.get_close_matches(key, valid, n=2, cutoff=0.6)
        parts.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""))
    return TypeError(
        f"{owner} got unexpected option(s) {', '.join(parts)}. Valid options: {', '.join(valid) or '(none)'}."
    )


class OptionTypeError(TypeError, ValueError):
    """An option of the wrong type (a ``ValueError`` too: callers that validate values catch it)."""


def positive_int(name: str, value: Any, *, allow_none: bool = False) -> Optional[int]:
    """``value`` if it is an ``int`` >= 1 (bools are not ints), else a ``ValueError`` naming ``name``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


#: annotations (as written, ``from __future__ import annotations``) that the type rule reads as declared:
#: any other annotation widens an option beyond its default's type (``beta: Beta = 2.0`` takes a sampler too)
_SCALAR_ANNOTATIONS = {"bool", "int", "float", bool, int, float}


def accepted_options(obj: Any, skip: int = 0) -> Optional[Dict[str, Any]]:
    """The keyword options ``obj`` accepts with their defaults (``inspect.Parameter.empty``: required):
    a class's ``__init__`` parameters, up its bases while ``**kwargs`` passes them on, or a function's
    parameters after the first ``skip`` (the inputs a caller passes positionally, e.g. an init's
    model).  ``None``: a function that takes any keyword (``**kwargs``)."""
    found = _signature_options(obj, skip)
    return None if found is None else dict(found[0])  # a copy: callers may edit theirs


def widened_options(obj: Any, skip: int = 0) -> frozenset:
    """Options of ``obj`` whose annotation admits more than their default's type (left to the plugin)."""
    found = _signature_options(obj, skip)
    return frozenset() if found is None else found[1]


@functools.lru_cache(maxsize=None)
def _signature_options(obj: Any, skip: int) -> Optional[tuple]:
    # Cached: resolving a suite asks once per cell (10k cells in lipschitz_table1), and
    # inspect.signature over the MRO was most of a suite's load time.
    if not isinstance(obj, type):
        try:
            params = list(inspect.signature(obj).parameters.values())[skip:]
        except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
            return None
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return None
        params = [p for p in params if p.kind is not p.VAR_POSITIONAL]
    else:
        params = []
        for klass in obj.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            own = list(inspect.signature(init).parameters.values())[1 + skip:]
            params += [p for p in own if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if not any(p.kind is p.VAR_KEYWORD for p in own):
                break
            skip = 0  # positional inputs are the subclass's; its bases get them by keyword
    options: Dict[str, Any] = {}
    widened = set()
    for p in params:
        if p.name in options:
            continue
        options[p.name] = p.default
        if p.annotation is not p.empty and p.annotation not in _SCALAR_ANNOTATIONS:
            widened.add(p.name)
    return options, frozenset(widened)


def check_option_types(owner: str, options: Mapping[str, Any], accepted: Mapping[str, Any],
                       widened: Iterable[str] = ()) -> None:
    """An option whose default is a bool / int / float takes that type (bools are not ints:
    ``num_layers=True`` is an error, not one layer; a switch takes only true or false, since
    ``"false"`` or ``"no"`` would be truthy); ``None`` unsets any option but a switch.  ``widened``
    options (annotated wider than their default) are left to the plugin."""
    widened = set(widened)
    for key, value in options.items():
        default = accepted.get(key, inspect.Parameter.empty)
        if key in widened or (value is None and not isinstance(default, bool)):
            continue
        if isinstance(default, bool):
            ok, kind = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif isinstance(default, float):
            ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
        else:
            continue
        if not ok:
            hint = "; write true or false (unquoted in TOML and --set)" if kind == "true or false" else ""
            raise OptionTypeError(f"{owner}: option {key} must be {kind}, got {value!r} "
                                  f"({type(value).__name__}){hint}")


#: a kind's own value rules, run after the names are checked: ``rules(owner, options, accepted)``
OptionRules = Callable[[str, Mapping[str, Any], Mapping[str, Any]], None]


def check_options(owner: str, options: Mapping[str, Any], accepted: Optional[Mapping[str, Any]],
                  widened: Iterable[str] = (), elsewhere: Optional[Callable[[str], List[str]]] = None,
                  rules: Optional[OptionRules] = None) -> None:
    """The one check of a plugin's options: every name is one ``accepted`` lists (``None``: any name),
    then the kind's own ``rules``, then every value has the type of its default
    (:func:`check_option_types`).  ``elsewhere(option)`` names the other plugins of the kind that take
    an option this one does not."""
    if accepted is None:
        return
    unknown = [k for k in options if k not in accepted]
    if unknown:
        raise unknown_kwargs_error(owner, unknown, accepted, {k: elsewhere(k) for k in unknown} if elsewhere else None)
    if rules is not None:
        rules(owner, options, accepted)
    check_option_types(owner, options, accepted, widened)


def check_required(owner: str, options: Mapping[str, Any], accepted: Optional[Mapping[str, Any]]) -> None:
    """A ``TypeError`` naming the options without a default that ``options`` leaves out."""
    missing = [k for k, v in (accepted or {}).items() if v is inspect.Parameter.empty and k not in options]
    if missing:
        raise TypeError(f"{owner} needs option(s) {', '.join(missing)}. Its options: {', '.join(accepted or {})}.")


def definition(obj: Any) -> tuple:
    """Where ``obj`` was defined: ``(module, qualified name)`` (a registry's default identity)."""
    return (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None) or type(obj).__qualname__)


class Registry(Generic[T]):
    """A name -> plugin map with normalised names, aliases, one option check and helpful errors.

    Registering a taken name (or alias) for *another* plugin raises, so two plugins can never
    shadow each other; the *same* definition registered again (a notebook cell run twice: same
    module and qualified name, as ``identity`` reads them) replaces the old one with a warning.

    ``populate`` names the modules whose import registers the entries; they are imported before the
    first lookup, so a registry is complete whatever was imported before it (``import
    zoo.nn.encoders`` alone still sees the encoders :mod:`zoo.papers` registers).

    :meth:`create` makes a plugin: ``create(name, *inputs, **options)`` checks ``options`` against
    what the entry accepts (:func:`check_options`) and calls it.  What an entry accepts is its
    signature (:func:`accepted_options`, after the positional ``inputs``) unless ``options`` says
    otherwise (a dataset declares its options as data); ``factory`` turns an entry into the callable
    (default: the entry itself); ``check(owner, options, accepted)`` adds the kind's own value rules.
    """

    def __init__(self, kind: str, populate: Iterable[str] = (), identity: Optional[Callable[[T], Any]] = None,
                 options: Optional[Callable[[T], Optional[Mapping[str, Any]]]] = None,
                 factory: Optional[Callable[[T], Callable[..., Any]]] = None,
                 check: Optional[OptionRules] = None) -> None:
        self.kind = kind
        self._items: Dict[str, T] = {}
        self._aliases: Dict[str, str] = {}
        self.populate = tuple(populate)
        self._unpopulated = bool(self.populate)
        self._identity = identity or definition
        self._options, self._factory, self._check = options, factory, check

    def _populated(self) -> None:
        if self._unpopulated:
            self._unpopulated = False  # once; registering inside it must not recurse
            for module in self.populate:
                importlib.import_module(module)

    def options(self, name: str, skip: int = 0) -> Optional[Dict[str, Any]]:
        """The options entry ``name`` accepts, with defaults (``None``: any keyword), after ``skip`` inputs."""
        entry = self.get(name)
        if self._options is not None:
            declared = self._options(entry)
            return None if declared is None else dict(declared)
        return accepted_options(entry, skip)

    def takers(self, option: str) -> List[str]:
        """The entries that take ``option`` (an error names them when another entry is given it)."""
        return [n for n in self.names() if option in (self.options(n) or {})]

    def check(self, name: str, options: Mapping[str, Any], skip: int = 0) -> None:
        """Refuse, with one line, an option entry ``name`` does not take or a value of the wrong type."""
        key = self.canonical(name)
        accepted = self.options(key, skip)
        widened = () if self._options is not None else widened_options(self.get(key), skip)
        check_options(f"{self.kind} {key!r}", options, accepted, widened, self.takers, self._check)

    def create(self, name: str, *inputs: Any, **options: Any) -> Any:
        """Plugin ``name`` made from ``inputs`` and its checked ``options`` (required ones included)."""
        self.check(name, options, skip=len(inputs))
        check_required(f"{self.kind} {self.canonical(name)!r}", options, self.options(name, len(inputs)))
        entry = self.get(name)
        return (self._factory(entry) if self._factory is not None else entry)(*inputs, **options)

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
