"""docs/architecture.md names only modules, objects and files that exist, and every benchmark layer."""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from typing import List, Optional

from tests.conftest import REPO
from tests.test_layering import LAYERS, LEAVES, ROOMS

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


def test_the_page_names_every_room_the_import_rules_enforce():
    """The room table is the rule of tests/test_layering.py (ROOMS): each room is on the page."""
    text = DOC.read_text()
    rooms = [r for r in [*ROOMS, *LEAVES] if r not in ("leaves", "zoo.__main__", "zoo._catalogue")]
    assert [r for r in rooms if f"`{r}`" not in text] == []


def test_the_page_says_where_to_add_each_kind_of_plugin():
    text = DOC.read_text()
    sections = re.findall(r"^\*\*An? (\w+)", text, flags=re.M)
    assert {"model", "init", "norm", "dataset", "suite", "kernel"} <= set(sections)
    assert "## The dispatch rule for kernels" in text and "## A suite cell, from TOML to record to page" in text


#: test folders and files that test the repository rather than one module of the package
REPOSITORY_TESTS = {"benchmarks", "research", "packaging", "test_architecture_doc.py", "test_layering.py",
                    "test_guide.py", "test_docs_dgl.py", "test_docs_snippets.py", "test_xdist_groups.py"}


def misplaced_tests(tests: Path, package: Path) -> List[str]:
    """Test files outside the folder of what they test: ``tests/<pkg>/`` mirrors ``zoo/<pkg>/``, and a
    top-level ``tests/test_<name>[_<aspect>].py`` tests the module ``zoo/<name>.py`` (or ``zoo/_<name>.py``)."""
    bad = []
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(tests)
        if rel.parts[0] in REPOSITORY_TESTS:
            continue
        if len(rel.parts) > 1:
            folder = package
            for part in rel.parts[:-1]:  # tests/ops/compiled/ mirrors zoo/ops/_compiled/
                folder = folder / part if (folder / part).is_dir() else folder / f"_{part}"
            if not folder.is_dir():
                bad.append(str(rel))
            continue
        stem = rel.stem[len("test_"):]
        modules = {p.stem.lstrip("_") for p in package.glob("*.py")}
        if not any(stem == m or stem.startswith(m + "_") for m in modules):
            bad.append(str(rel))
    return bad


def test_the_tests_mirror_the_package(tmp_path):
    for name in ("zoo/graph.py", "zoo/_names.py", "zoo/nn/base.py", "tests/test_graph_cache.py", "tests/test_names.py",
                 "tests/nn/test_base.py", "tests/test_bad_inputs.py", "tests/bench/run/test_loop.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert misplaced_tests(tmp_path / "tests", tmp_path / "zoo") == ["bench/run/test_loop.py", "test_bad_inputs.py"]
    assert misplaced_tests(REPO / "tests", REPO / "zoo") == []
