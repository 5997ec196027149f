"""Generated parts of the model pages (``docs/models/*.md``): equation, shapes, options, presets.

Each page keeps its hand-written prose; the block between :data:`BEGIN` and :data:`END` is
rendered from the sources that own the facts, so none of them is written twice:

* the **equation** and **shapes** from the docstrings of the classes a model card names in
  ``layers`` (``registry/*.toml``; a ``.. math::`` block and a ``Shapes:`` section each);
* the **options** from the model class's constructor and layer options (names and defaults) and the
  ``Args:`` sections of their docstrings (meanings); options shared by every ``DeepGNN`` model link
  to ``docs/usage.md`` instead;
* the **presets** and their reported numbers from the model card.

Rendering is pure (strings in, strings out); reading and writing pages is the CLI's job
(``zoo docs [--check]``, :mod:`zoo.cli.docs`).
"""
from __future__ import annotations

import inspect
import re
from typing import Any, Dict, List, Sequence

import zoo.models  # noqa: F401  (registers the model classes)
from zoo import _docstrings
from zoo.nn.base import DeepGNN
from zoo.registry import MODELS, catalogue, constructor_options

BEGIN = "<!-- generated:begin (zoo docs) -->"
END = "<!-- generated:end -->"
SHARED_OPTIONS_LINK = "../usage.md#shared-model-options"


class StalePageError(ValueError):
    """A page lacks the generated-block markers (or has them out of order)."""


def layer_classes(name: str) -> List[type]:
    """The classes whose docstrings carry model ``name``'s equation (card key ``layers``)."""
    card = catalogue()[MODELS.canonical(name)]
    paths = card.get("layers")
    if not paths:
        raise LookupError(f"model card {name!r} ({card.get('_source')}) names no `layers`; "
                          "add the dotted names of the classes whose docstrings state its equation")
    return [_docstrings.resolve(p) for p in paths]


def _markdown(rest: str) -> str:
    """reST inline markup of the docstrings as Markdown."""
    text = re.sub(r":(?:class|func|meth|mod|attr):`~?(?:[\w.]*\.)?(\w+)`", r"`\1`", rest)
    text = re.sub(r":math:`([^`]*)`", r"$\1$", text)
    return re.sub(r"``([^`]*)``", r"`\1`", text)


def _docstring_parts(cls: type) -> List[str]:
    """The docstring in order as Markdown: prose paragraphs and ```math fences (one per formula
    paragraph), without its Shapes / Args sections (rendered elsewhere)."""
    lines = (inspect.getdoc(cls) or "").splitlines()
    parts: List[str] = []
    prose: List[str] = []

    def flush() -> None:
        if prose:
            parts.append(_markdown(" ".join(" ".join(prose).split())))
            prose.clear()

    skip_under = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if skip_under is not None:
            if not stripped or indent > skip_under:
                continue
            skip_under = None
        if stripped.startswith(".. math::") or re.match(r"^(Shapes|Args):", stripped):
            flush()
            skip_under = indent
            if stripped.startswith(".. math::"):
                parts.append(None)  # placeholder: the next math block goes here
            continue
        if not stripped:
            flush()
        else:
            prose.append(stripped)
    flush()
    blocks = iter(_docstrings.math_blocks(cls))
    out: List[str] = []
    for part in parts:
        if part is None:
            for formula in next(blocks).split("\n\n"):
                out.append("```math\n" + formula.strip("\n") + "\n```")
        else:
            out.append(part)
    return out


def _shapes(cls: type) -> str:
    text = _docstrings.section(cls, "Shapes")
    return _markdown(" ".join(text.split()))


def _equation_section(classes: Sequence[type]) -> List[str]:
    out = ["## Equation", ""]
    for cls in classes:
        parts = _docstring_parts(cls)
        out += [f"`{cls.__name__}` (`{cls.__module__}`): {parts[0]}" if parts else f"`{cls.__name__}`", ""]
        for part in parts[1:]:
            out += [part, ""]
        shapes = _shapes(cls)
        if shapes:
            out += [f"Shapes: {shapes}", ""]
    return out


def _shared_options() -> Dict[str, Any]:
    """Options of the shared depth machinery, documented once in docs/usage.md."""
    return constructor_options(DeepGNN)


def _format_default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    return f"`{value!r}`"


def option_meanings(model: type, classes: Sequence[type]) -> Dict[str, str]:
    """``Args:`` entries of the model class (and its bases), of its layer options (``options_class``)
    and of the card's classes."""
    meanings: Dict[str, str] = {}
    options_class = getattr(model, "options_class", None)
    for cls in [*model.__mro__, *(options_class.__mro__ if options_class is not None else ()), *classes]:
        for key, text in _docstrings.arguments(cls).items():
            meanings.setdefault(key, _markdown(text))
    return meanings


def _options_section(name: str, classes: Sequence[type]) -> List[str]:
    model = MODELS.get(name)
    options = constructor_options(model)
    shared = _shared_options()
    is_deep = issubclass(model, DeepGNN)
    own = {k: v for k, v in options.items() if not (is_deep and k in shared)}
    meanings = option_meanings(model, classes)
    out = ["## Options", ""]
    if is_deep:
        names = ", ".join(f"`{k}`" for k in shared)
        out += [f"The [shared options]({SHARED_OPTIONS_LINK}) of the deep models ({names})"
                + (", plus:" if own else "."), ""]
    if own:
        out += ["| option | default | meaning |", "|---|---|---|"]
        for key, default in own.items():
            cells = (f"`{key}`", _format_default(default), meanings.get(key, ""))
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return out


def _reported_for(tag: str, reported: Dict[str, Any]) -> List[str]:
    return [f"{k[len(tag) + 1:]} {v}" for k, v in reported.items() if k.startswith(tag + ".")]


def _presets_section(name: str) -> List[str]:
    card = catalogue()[MODELS.canonical(name)]
    presets = card.get("presets", {})
    if not presets:
        return []
    out = ["## Presets", ""]
    reported = card.get("reported", {})
    for tag, preset in presets.items():
        line = f"- `{name}.{tag}` — {preset.get('description', '').rstrip('.')}"
        if preset.get("reference"):
            line += f" ({preset['reference']})"
        line += "."
        numbers = _reported_for(tag, reported)
        if numbers:
            line += " Reported: " + "; ".join(numbers) + "."
        out.append(line)
    return out + [""]


def render_block(name: str) -> str:
    """The generated block of model ``name``'s page, markers included."""
    name = MODELS.canonical(name)
    classes = layer_classes(name)
    source = catalogue()[name].get("_source", "registry/*.toml")
    lines = [BEGIN,
             f"<!-- rendered by `zoo docs` from the docstrings of {', '.join(c.__name__ for c in classes)} "
             f"and registry/{source}: edit those, then run `zoo docs` -->", ""]
    lines += _equation_section(classes) + _options_section(name, classes) + _presets_section(name)
    while lines[-1] == "":
        lines.pop()
    return "\n".join(lines + [END])


def render_page(page: str, name: str) -> str:
    """``page`` with its generated block replaced by :func:`render_block` (hand-written text kept)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise StalePageError(f"the page of model {name!r} has no `{BEGIN}` ... `{END}` block; "
                             "add the two markers where the generated sections belong")
    return page[:start] + render_block(name) + page[end + len(END):]


def documented_models() -> Dict[str, str]:
    """``{model name: docs page path}`` for every registered model whose card names a page."""
    return {name: card["docs"] for name, card in sorted(catalogue().items())
            if card.get("docs") and name in MODELS.names()}
