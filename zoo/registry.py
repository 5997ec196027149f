"""The model registry and the catalogue of model cards and presets.

Architecture lives in ``zoo/models/<family>.py`` (each class registers itself with
:func:`register_model`); everything *about* a model — paper, equation, presets, reported
numbers — lives as data in the top-level ``registry/`` folder (shipped in the wheel as
``zoo._catalogue``), one TOML file per family.
"""
from __future__ import annotations

import fnmatch
import functools
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Type

from zoo import _docstrings
from zoo._names import Registry, accepted_options, normalize_name, positive_int, unknown_name_error

from zoo._toml import tomllib

#: The module whose import registers every model family: imported by name at the first lookup (the
#: family modules import this module for register_model, so a module-level import would be a cycle).
FAMILY_MODULES = ("zoo.models",)
#: Sizes every model family shares: each must be an int >= 1 (None = unset where the default is None).
POSITIVE_INTS = ("in_dim", "out_dim", "hidden_dim", "num_layers", "heads", "out_heads", "ffn_dim")


def constructor_options(cls: type) -> Dict[str, Any]:
    """Every keyword a model class accepts, with its default (``inspect.Parameter.empty`` if required):
    its constructor's and its layers' (``options_class``, a dataclass, :class:`zoo.nn.model.LayerOptions`)."""
    return dict(_constructor_options(cls))  # a copy: callers may edit theirs


@functools.lru_cache(maxsize=None)
def _constructor_options(cls: type) -> Dict[str, Any]:
    options = accepted_options(cls) or {}
    options_class = getattr(cls, "options_class", None)  # read by name: the models load torch, this module not
    if options_class is not None:
        for key, default in options_class.defaults().items():
            options.setdefault(key, default)
    return options


def _check_sizes(owner: str, options: Mapping[str, Any], accepted: Mapping[str, Any]) -> None:
    """Sizes are positive ints, named when they are not (not a raw torch error deep in a constructor)."""
    for key in POSITIVE_INTS:
        if key in options:
            positive_int(key, options[key], allow_none=accepted.get(key) is None)


MODELS: Registry[type] = Registry("model", populate=FAMILY_MODULES, options=constructor_options, check=_check_sizes)


def register_model(name: str, *, aliases: tuple = ()) -> Callable[[Type], Type]:
    """Class decorator: register a model under ``name`` (raises if another model holds the name; the
    same class defined again, a notebook cell run twice, replaces it with a warning)."""

    def decorator(cls: Type) -> Type:
        MODELS.add(name, cls, aliases)
        cls.model_name = normalize_name(name)
        return cls

    return decorator


def list_models(pattern: Optional[str] = None) -> List[str]:
    """Registered model names, optionally filtered by a shell-style ``pattern`` (``"gat*"``)."""
    names = MODELS.names()
    if pattern is None:
        return names
    return [n for n in names if fnmatch.fnmatchcase(n, normalize_name(pattern))]


def _catalogue_dir() -> Path:
    # A source tree's own registry/ first: an editable install maps zoo._catalogue to the one
    # checkout it was installed from, which is not this one in a second worktree.
    beside = Path(__file__).resolve().parents[1] / "registry"
    if (beside / "__init__.py").is_file() and any(beside.glob("*.toml")):
        return beside
    try:
        import importlib.resources as resources

        import zoo._catalogue  # noqa: F401  (the registry/ folder, mapped in setup.cfg)

        return Path(str(resources.files("zoo._catalogue")))
    except ModuleNotFoundError:  # running from a source tree that is not installed
        return Path(__file__).resolve().parents[1] / "registry"


@functools.lru_cache(maxsize=None)
def catalogue() -> Dict[str, Dict[str, Any]]:
    """All model cards from ``registry/*.toml``, keyed by model name."""
    cards: Dict[str, Dict[str, Any]] = {}
    for path in sorted(_catalogue_dir().glob("*.toml")):
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        for name, card in data.items():
            key = normalize_name(name)
            if key in cards:
                raise ValueError(f"model card {key!r} is defined twice (second time in {path.name})")
            cards[key] = dict(card, _source=path.name)
    return cards


@dataclass
class ModelCard:
    """What the zoo knows about a model: where it comes from and how to build it."""

    name: str
    family: str
    title: str
    paper: str
    equation: str
    defaults: Dict[str, Any]
    presets: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    reported: Dict[str, Any] = field(default_factory=dict)
    docs: str = ""
    notes: str = ""

    def __str__(self) -> str:
        lines = [f"{self.name} — {self.title}", f"  paper:    {self.paper}", f"  equation: {self.equation}"]
        lines.append("  defaults: " + ", ".join(f"{k}={v!r}" for k, v in self.defaults.items()))
        if self.presets:
            lines.append("  presets:  " + ", ".join(f"{self.name}.{t}" for t in self.presets))
        return "\n".join(lines)


def model_card(name: str) -> ModelCard:
    """The model card of ``name`` (paper reference, the layer's equation, defaults, presets)."""
    key = MODELS.canonical(name.split(".")[0])
    card = catalogue().get(key)
    if card is None:
        raise LookupError(f"model {key!r} is registered but has no card in registry/*.toml; add one")
    defaults = {
        k: v for k, v in constructor_options(MODELS.get(key)).items() if v is not inspect.Parameter.empty
    }
    return ModelCard(
        name=key,
        family=card.get("family", key),
        title=card["title"],
        paper=card["paper"],
        equation=card.get("equation") or _docstrings.equation_text(card.get("layers", [])),
        defaults=defaults,
        presets={t: {k: v for k, v in p.items() if k not in ("description", "reference")}
                 for t, p in card.get("presets", {}).items()},
        reported=card.get("reported", {}),
        docs=card.get("docs", ""),
        notes=card.get("notes", ""),
    )


def preset(name: str, tag: str) -> Dict[str, Any]:
    """Keyword arguments of preset ``name.tag`` (descriptions and references stripped)."""
    card = model_card(name)
    key = normalize_name(tag)
    if key not in card.presets:
        raise unknown_name_error("preset", f"{card.name}.{tag}", [f"{card.name}.{t}" for t in card.presets],
                                 hint=f"List them with zoo.list_presets('{card.name}.*').")
    return dict(card.presets[key])


def list_presets(pattern: Optional[str] = None) -> List[str]:
    names = [f"{m}.{t}" for m in MODELS.names() for t in catalogue().get(m, {}).get("presets", {})]
    if pattern is None:
        return sorted(names)
    return sorted(n for n in names if fnmatch.fnmatchcase(n, normalize_name(pattern)))
