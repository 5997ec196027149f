"""The built-in plugins' names and aliases as data, for what lists them without importing torch.

``plugin_names.json`` beside this module holds, per section (models, inits, norms, datasets), each
registered name with its aliases, as the registries have them once every built-in plugin module is
imported.  ``zoo list`` reads it (the registries' modules import torch and PyG: seconds).  ``zoo
docs`` writes it from the registries (:func:`render`), and ``zoo docs --check`` and
``tests/cli/test_plugin_names.py`` fail while it differs from them.  A process that has imported a
section's plugin modules already (a user's own plugins registered beside the built-in ones) reads
that registry instead.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

PATH = Path(__file__).resolve().parent / "plugin_names.json"
#: section -> (plugin kind of :mod:`zoo.bench.suite.plugins`, the modules whose import registers it)
SECTIONS: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "models": ("model", ("zoo.models", "zoo.papers")),
    "inits": ("init", ("zoo.inits",)),
    "norms": ("norm", ("zoo.norms",)),
    "datasets": ("dataset", ("zoo.datasets",)),
}
Entries = List[Tuple[str, List[str]]]


def live(section: str) -> Entries:
    """``[(name, sorted aliases)]`` of a section, from its registry (imports the plugin modules)."""
    from zoo.bench.suite.plugins import registry

    reg = registry(SECTIONS[section][0])
    by_name: Dict[str, List[str]] = {n: [] for n in reg.names()}
    for alias, name in reg.aliases().items():
        by_name.setdefault(name, []).append(alias)
    return [(n, sorted(a)) for n, a in sorted(by_name.items())]


def stored() -> Dict[str, Entries]:
    """The sections as written in ``plugin_names.json``."""
    data = json.loads(PATH.read_text(encoding="utf-8"))
    return {section: [(name, list(aliases)) for name, aliases in data[section]] for section in SECTIONS}


def plugin_names(section: str) -> Entries:
    """A section's names and aliases: its registry if this process imported its plugins, else the file."""
    if all(module in sys.modules for module in SECTIONS[section][1]):
        return live(section)
    return stored()[section]


def render() -> str:
    """``plugin_names.json`` as the registries make it now."""
    sections = []
    for section in SECTIONS:
        rows = ",\n".join(f"  {json.dumps([name, aliases])}" for name, aliases in live(section))
        sections.append(f" {json.dumps(section)}: [\n{rows}\n ]")
    return "{\n" + ",\n".join(sections) + "\n}\n"


__all__ = ["PATH", "SECTIONS", "live", "plugin_names", "render", "stored"]
