"""Snippets in the README and docs/usage.md say what the code does: the README's ``list_models`` comment
is its output, and the encoder example defines every name it uses."""
from __future__ import annotations

import ast
import builtins
import re

import zoo
from tests.conftest import REPO


def test_the_readme_lists_the_models_it_names():
    line = next(l for l in (REPO / "README.md").read_text().splitlines() if 'list_models("gat*")' in l)
    assert ast.literal_eval(line.split("#", 1)[1].strip()) == zoo.list_models("gat*")


def _free_names(code: str) -> set:
    tree = ast.parse(code)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - stored - set(dir(builtins))


def test_the_encoder_example_defines_what_it_uses():
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "usage.md").read_text(), flags=re.S)
    block = next(b for b in blocks if 'input_encoder="atom"' in b)
    assert _free_names(block) <= {"zoo", "torch"}
