"""docs/architecture.md names only modules, objects and files that exist, and every benchmark layer."""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import List, Optional

from tests.conftest import REPO
from tests.test_layering import LAYERS

DOC = REPO / "docs" / "architecture.md"
#: Top-level folders of this repository: a backticked path starting with one is checked.
REPO_FOLDERS = ("zoo/", "tests/", "docs/", "benchmarks/", "registry/")


def _code_spans(text: str) -> List[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _resolve(dotted: str) -> bool:
    """``zoo.a.b`` is a module, or ``zoo.a`` is one with an attribute ``b`` (and so on down)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            continue
        obj = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _path_exists(token: str, root: Path) -> bool:
    """A repository path; with a placeholder (``zoo/models/<family>.py``) its folder must exist, a
    pattern (``registry/*.toml``) must match."""
    if "*" in token:
        return any(root.glob(token))
    if "<" in token:
        return (root / token.split("<", 1)[0]).is_dir()
    return (root / token).exists()


def missing_names(text: str, root: Path = REPO) -> List[str]:
    missing = []
    for span in _code_spans(text):
        for token in re.split(r"[\s,()\[\]=]+", span):
            token = token.rstrip(".:;")
            if re.fullmatch(r"zoo(\.[A-Za-z_]\w*)+", token) and not _resolve(token):
                missing.append(token)
            elif token.startswith(REPO_FOLDERS) and not _path_exists(token, root):
                missing.append(token)
    return sorted(set(missing))


def test_the_check_finds_a_name_that_does_not_exist():
    text = ("`zoo.nn.base.DeepGNN`, `zoo.nn.nowhere`, `zoo.ops.dispatch.no_rule`, `zoo/models/<family>.py`, "
            "`zoo/models/missing.py`, `docs/nowhere/<x>.md`, `registry/*.toml`, `registry/*.yaml`, "
            "`results/quick` (not a repository path)")
    assert missing_names(text) == ["docs/nowhere/<x>.md", "registry/*.yaml", "zoo.nn.nowhere",
                                   "zoo.ops.dispatch.no_rule", "zoo/models/missing.py"]


def test_every_name_on_the_architecture_page_exists():
    assert missing_names(DOC.read_text()) == []


def test_the_page_names_every_benchmark_layer_and_the_training_layer():
    text = DOC.read_text()
    assert [layer for layer in [*LAYERS, "zoo.trainer"] if f"`{layer}`" not in text] == []


def test_the_page_says_where_to_add_each_kind_of_plugin():
    text = DOC.read_text()
    sections = re.findall(r"^\*\*An? (\w+)", text, flags=re.M)
    assert {"model", "init", "norm", "dataset", "suite", "kernel"} <= set(sections)
    assert "## The dispatch rule for kernels" in text and "## A suite cell, from TOML to record to page" in text
