"""``zoo docs [--check]``: regenerate the generated blocks of ``docs/models/*.md`` and the built-in
plugins' names that ``zoo list`` reads (``zoo/cli/plugin_names.json``, :mod:`zoo.cli.plugin_names`).

The rendering is :mod:`zoo.docgen` (no IO); this module reads and writes the pages. Like
``zoo report --check``, ``--check`` writes nothing and exits 1 when a page is out of date.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

from zoo.cli.args import user_path

EXIT_STALE = 1


def register(sub: Any) -> None:
    p = sub.add_parser("docs", help="regenerate the equation / options / presets blocks of docs/models/*.md "
                                    "from the layer docstrings and registry/*.toml")
    p.add_argument("--root", default=".", type=user_path, help="repository root holding docs/models/ (default: the current folder)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a page's generated block is out of date")
    p.set_defaults(handler=run, prog=p.prog)


def stale_pages(root: Path) -> Dict[Path, str]:
    """``{page: up-to-date text}`` for every model page whose text differs from its rendering."""
    from zoo.docgen import documented_models, render_page

    stale: Dict[Path, str] = {}
    for name, rel in documented_models().items():
        path = root / rel
        if not path.is_file():
            raise ValueError(f"model {name!r}: its card names the page {rel}, which does not exist under {root}; "
                             "create it (with the generated-block markers) or fix `docs` in registry/*.toml")
        text = path.read_text(encoding="utf-8")
        new = render_page(text, name)
        if new != text:
            stale[path] = new
    return stale


def _replace_text(path: Path, text: str) -> None:
    # A page appears whole or not at all (a killed run leaves the old page, never half of one).
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def stale_names() -> Dict[Path, str]:
    """``{zoo/cli/plugin_names.json: up-to-date text}`` if the stored plugin names differ from the registries'."""
    from zoo.cli import plugin_names

    text = plugin_names.render()
    current = plugin_names.PATH.read_text(encoding="utf-8") if plugin_names.PATH.is_file() else None
    return {} if current == text else {plugin_names.PATH: text}


def run(args: argparse.Namespace) -> int:
    """Write (or, with ``--check``, only report) the stale model pages and plugin names."""
    try:
        stale = {**stale_pages(Path(args.root)), **stale_names()}
    except LookupError as e:  # a card naming a missing class: one line (exit 2), like other bad input
        raise ValueError(str(e)) from e
    names: List[str] = sorted(str(p) for p in stale)
    if args.check:
        if names:
            print(f"zoo docs: out of date: {', '.join(names)}; run `zoo docs` and commit them", file=sys.stderr)
            return EXIT_STALE
        print("zoo docs: model pages and plugin names up to date")
        return 0
    for path, text in stale.items():
        _replace_text(path, text)
        print(f"updated {path}")
    return 0
