"""Reading the parts of a layer's docstring that the docs and model cards reuse.

A layer states its paper's equation once, in its docstring, as a reST ``.. math::`` block, and
its tensor shapes in a ``Shapes:`` section (PyG's convention); a model class lists its own
options in an ``Args:`` section (Google style). The model cards (``zoo.model_card``) and the
generated model pages (``zoo.docgen``) read them from here, so none of them is written twice.

A leaf module: standard library only, no zoo imports (``zoo.registry`` imports it).
"""
from __future__ import annotations

import importlib
import inspect
import re
from typing import Dict, List, Sequence, Union

_SECTION = re.compile(r"^(?P<name>[A-Z][A-Za-z ]*):\s*(?P<rest>.*)$")


def _lines(obj: object) -> List[str]:
    return (inspect.getdoc(obj) or "").splitlines()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indented_block(lines: List[str], start: int, base: int) -> List[str]:
    """Lines from ``start`` while they are blank or indented deeper than ``base``."""
    block: List[str] = []
    for line in lines[start:]:
        if line.strip() and _indent(line) <= base:
            break
        block.append(line)
    while block and not block[-1].strip():
        block.pop()
    return block


def _dedent(block: List[str]) -> List[str]:
    width = min((_indent(line) for line in block if line.strip()), default=0)
    return [line[width:] for line in block]


def math_blocks(obj: object) -> List[str]:
    """The LaTeX of every ``.. math::`` block in ``obj``'s docstring, dedented, in order."""
    lines = _lines(obj)
    blocks = []
    for i, line in enumerate(lines):
        if line.strip().startswith(".. math::"):
            inline = line.strip()[len(".. math::"):].strip()
            body = _dedent(_indented_block(lines, i + 1, _indent(line)))
            blocks.append("\n".join(([inline] if inline else []) + body).strip("\n"))
    return blocks


def section(obj: object, name: str) -> str:
    """The text of section ``name`` (e.g. ``"Shapes"``): what follows ``Name:`` on its line and
    the lines indented under it, dedented; ``""`` when the docstring has no such section."""
    lines = _lines(obj)
    for i, line in enumerate(lines):
        match = _SECTION.match(line.strip())
        if match and match.group("name") == name:
            body = _dedent(_indented_block(lines, i + 1, _indent(line)))
            first = [match.group("rest")] if match.group("rest") else []
            return "\n".join(first + body).strip()
    return ""


def arguments(obj: object) -> Dict[str, str]:
    """``Args:`` entries as ``{name: description}`` (one line each); ``a, b: text`` gives both names."""
    text = section(obj, "Args")
    entries: Dict[str, str] = {}
    names: List[str] = []
    for line in text.splitlines():
        head = re.match(r"^(?P<names>[A-Za-z_][\w, ]*):\s+(?P<text>.*)$", line)
        if head and not line.startswith(" "):
            names = [n.strip() for n in head.group("names").split(",") if n.strip()]
            for n in names:
                entries[n] = head.group("text").strip()
        elif names and line.strip():
            for n in names:
                entries[n] += " " + line.strip()
    return entries


def resolve(dotted: str) -> object:
    """The object a dotted name (``"zoo.models.gat.GATLayer"``) names; one clear error if none."""
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise LookupError(f"{dotted!r} names no class ({e}); fix `layers` in the model card (registry/*.toml)") from e


def equation_text(objs: Sequence[Union[str, object]]) -> str:
    """The math blocks of ``objs`` (objects or dotted names) one line each, joined with ``"; "``."""
    found = [resolve(o) if isinstance(o, str) else o for o in objs]
    return "; ".join(" ".join(block.split()) for obj in found for block in math_blocks(obj))
