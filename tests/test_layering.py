"""The package's import structure, checked statically: no import cycle anywhere in ``zoo/``, the
benchmark layers import only downward, the training layer (``zoo.trainer``, under both ``zoo.fit``
and ``zoo bench``) imports nothing from ``zoo.bench``, and the torch-free layers stay torch-free.

The graph is read with ``ast`` from the source (module-level *and* function-level imports; imports
under ``if TYPE_CHECKING:`` are skipped because they never run). An edge ``a -> b`` means module
``a`` names module ``b`` in an import statement; the parent packages Python initialises on the way
are not edges (every submodule would otherwise "import" its package).

Print the graph: ``python -m tests.test_layering`` (edges between top-level rooms, then any cycle).
"""
from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "zoo"

#: The benchmark layers, lowest first; a layer may import only the layers listed for it.
LAYERS: Dict[str, Set[str]] = {
    "zoo.bench.suite": set(),
    "zoo.bench.plan": {"zoo.bench.suite"},
    "zoo.bench.store": {"zoo.bench.suite", "zoo.bench.plan"},
    "zoo.bench.run": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store"},
    "zoo.bench.analyze": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store"},
    "zoo.bench.report": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store", "zoo.bench.analyze"},
    "zoo.bench.render": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store", "zoo.bench.analyze",
                         "zoo.bench.report"},
    "zoo.bench.publish": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store", "zoo.bench.analyze",
                          "zoo.bench.report", "zoo.bench.render"},
    "zoo.bench.recheck": {"zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store", "zoo.bench.run", "zoo.bench.analyze",
                          "zoo.bench.report"},
}
#: The training layer: ``zoo.bench`` and ``zoo.fit`` (:mod:`zoo.fitting`) build on it, so it imports neither.
TRAINER = "zoo.trainer"
#: ``zoo.trainer.config`` is the suite schema's ``TrainConfig``: the torch-free suite layer imports it.
TORCH_FREE = ("zoo.bench.suite", "zoo.bench.plan", "zoo.bench.store", "zoo.bench.analyze", "zoo.bench.report",
              "zoo.bench.render", "zoo.trainer.config")
#: Function-level imports allowed inside zoo/bench/: optional dependencies only.
OPTIONAL = {"ray", "matplotlib", "safetensors", "triton"}
#: Function-level imports allowed inside zoo/bench/ for a process's start-up cost, each with its reason:
#: scipy.special only for a Student-t quantile its table lacks (zoo.bench.analyze.stats.T975).
LAZY_FOR_STARTUP = {("zoo.bench.analyze.stats", "scipy.special")}

#: The rooms of the package (docs/architecture.md's first table), lowest first, each with the rooms it
#: may import.  A module's room is the longest prefix listed; the leaves are torch-free helpers.
LEAVES = ("zoo._names", "zoo._toml", "zoo._io", "zoo._version", "zoo._docstrings", "zoo._dgl",
          "zoo._catalogue", "zoo._ogb", "zoo._user_modules", "zoo._pyg_compat", "zoo._gc", "zoo._allocator")
MODEL_SIDE = {"leaves", "zoo.graph", "zoo.ops", "zoo.norms", "zoo.nn", "zoo.symmetry", "zoo.registry", "zoo.models",
              "zoo.papers", "zoo.inits", "zoo.build", "zoo.datasets"}
TOP = ("zoo", "zoo.__main__", "zoo.fitting", "zoo.diagnosing", "zoo.loading", "zoo.cli", "zoo.docgen")
ROOMS: Dict[str, Set[str]] = {
    "leaves": set(),
    "zoo.graph": {"leaves"},
    "zoo.ops": {"leaves"},
    "zoo.norms": {"leaves", "zoo.graph", "zoo.ops"},
    "zoo.nn": {"leaves", "zoo.graph", "zoo.ops", "zoo.norms"},
    "zoo.symmetry": set(),
    "zoo.registry": {"leaves"},
    "zoo.models": {"leaves", "zoo.nn", "zoo.norms", "zoo.ops", "zoo.graph", "zoo.registry"},
    "zoo.papers": {"leaves", "zoo.nn"},
    "zoo.inits": {"leaves", "zoo.symmetry"},
    "zoo.build": {"leaves", "zoo.registry", "zoo.inits", "zoo.nn"},
    "zoo.datasets": {"leaves"},
    "zoo.callbacks": set(),
    "zoo.rescale": {"leaves", "zoo.symmetry"},
    "zoo.trainer": MODEL_SIDE | {"zoo.callbacks", "zoo.rescale"},
    "zoo.diagnostics": MODEL_SIDE | {"zoo.callbacks", "zoo.rescale", "zoo.trainer"},
    "zoo.model_file": {"leaves", "zoo.build", "zoo.nn"},
    "zoo.bench": MODEL_SIDE | {"zoo.callbacks", "zoo.trainer", "zoo.rescale", "zoo.diagnostics", "zoo.model_file"},
    **{top: {"*"} for top in TOP},
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Imports(ast.NodeVisitor):
    """Collects ``(module named, lineno, function_level)`` for every import statement that runs:
    ``import a.b`` names ``a.b``; ``from a import b`` names ``a.b`` when that is a module, else ``a``."""

    def __init__(self, module: str, is_package: bool, modules: Set[str]) -> None:
        self.module, self.is_package, self.modules = module, is_package, modules
        self.found: List[Tuple[str, int, bool]] = []
        self._depth = 0

    def _base(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        return ".".join(package + ([node.module] if node.module else []))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, node.lineno, self._depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._base(node)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self.found.append((sub if sub in self.modules else base, node.lineno, self._depth > 0))


def import_graph(root: Path = PACKAGE) -> Tuple[Dict[str, Set[str]], Dict[str, List[Tuple[str, int, bool]]]]:
    """``edges[a]`` = the modules of ``root``'s package that ``a`` imports; ``raw[a]`` = every import
    ``(module named, lineno, function_level)``, inside the package or not."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    edges: Dict[str, Set[str]] = {}
    raw: Dict[str, List[Tuple[str, int, bool]]] = {}
    for name, path in files.items():
        visitor = _Imports(name, path.name == "__init__.py", set(files))
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        raw[name] = visitor.found
        edges[name] = {t for t, _, _ in visitor.found if t in files and t != name}
    return edges, raw


def cycles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> Optional[str]:
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def upward_imports(edges: Dict[str, Set[str]]) -> List[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        mine = layer_of(source)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs is not None and theirs != mine and theirs not in LAYERS[mine]:
                bad.append(f"{source} -> {target} ({mine} may import only {sorted(LAYERS[mine]) or 'nothing'})")
            elif theirs is None and target.startswith("zoo.bench") and target not in ("zoo.bench",):
                # a module of zoo.bench outside the layers (publish is a layer of its own)
                bad.append(f"{source} -> {target} (a layer imports a module outside the layers)")
    return bad


def room_of(module: str) -> Optional[str]:
    """The room of ``module`` (:data:`ROOMS`): the longest listed prefix (``zoo`` itself is the facade)."""
    if module.startswith(LEAVES):
        return "leaves"
    if module == "zoo":
        return "zoo"
    found = [r for r in ROOMS if r not in ("leaves", "zoo") and (module == r or module.startswith(r + "."))]
    return max(found, key=len) if found else None


def backward_imports(edges: Dict[str, Set[str]]) -> List[str]:
    """Imports of a room by a room that may not import it (every module of zoo/ has a room)."""
    bad = []
    for source, targets in sorted(edges.items()):
        mine = room_of(source)
        if mine is None:
            bad.append(f"{source} is in no room of ROOMS")
            continue
        for target in sorted(targets):
            theirs = room_of(target)
            if theirs != mine and "*" not in ROOMS[mine] and theirs not in ROOMS[mine]:
                bad.append(f"{source} -> {target} ({mine} may import only {sorted(ROOMS[mine]) or 'nothing'})")
    return bad


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def trainer_imports_from_above(edges: Dict[str, Set[str]]) -> List[str]:
    """Imports of ``zoo.bench`` or ``zoo.fitting`` by a module of the training layer."""
    return sorted(f"{source} -> {target}" for source, targets in edges.items() if _within(source, TRAINER)
                  for target in targets if _within(target, "zoo.bench") or _within(target, "zoo.fitting"))


# ---------------------------------------------------------------------------------------------------
def test_cycle_finder_finds_a_reintroduced_cycle(tmp_path: Path) -> None:
    """The checks below can fail: a package whose __init__ imports a plugin module that imports the
    package back (the plugin-registry pattern this test forbids) is reported as a cycle."""
    pkg = tmp_path / "zoo"
    (pkg / "norms").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "norms" / "__init__.py").write_text("from zoo.norms.lipschitz import LipschitzNorm\n"
                                               "def register(f):\n    return f\n")
    (pkg / "norms" / "lipschitz.py").write_text("from zoo.norms import register\nclass LipschitzNorm: ...\n")
    edges, _ = import_graph(pkg)
    assert cycles(edges) == [["zoo.norms", "zoo.norms.lipschitz"]]
    # the fix: a leaf registry module both import
    (pkg / "norms" / "_registry.py").write_text("def register(f):\n    return f\n")
    (pkg / "norms" / "__init__.py").write_text("from zoo.norms._registry import register\n"
                                               "from zoo.norms.lipschitz import LipschitzNorm\n")
    (pkg / "norms" / "lipschitz.py").write_text("from zoo.norms._registry import register\n")
    edges, _ = import_graph(pkg)
    assert cycles(edges) == []


def test_function_level_import_counts(tmp_path: Path) -> None:
    pkg = tmp_path / "zoo"
    (pkg / "bench").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bench" / "__init__.py").write_text("")
    (pkg / "bench" / "a.py").write_text("def f():\n    from zoo.bench import b\n")
    (pkg / "bench" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from zoo.bench import c\nfrom zoo.bench.a import f\n")
    (pkg / "bench" / "c.py").write_text("from . import b\n")
    edges, _ = import_graph(pkg)
    assert cycles(edges) == [["zoo.bench.a", "zoo.bench.b"]]
    assert "zoo.bench.c" not in edges["zoo.bench.b"]  # TYPE_CHECKING imports never run
    assert edges["zoo.bench.c"] == {"zoo.bench.b"}      # relative imports resolve


def test_no_import_cycles() -> None:
    edges, _ = import_graph()
    assert cycles(edges) == []


def test_bench_layers_import_only_downward() -> None:
    edges, _ = import_graph()
    assert all(any(m == layer or m.startswith(layer + ".") for m in edges) for layer in LAYERS), \
        "every layer of zoo/bench exists"
    assert upward_imports(edges) == []


def test_the_rooms_import_only_the_rooms_below_them(tmp_path: Path) -> None:
    """docs/architecture.md's room table as a rule: the model side imports downward, the benchmark
    side imports the model side and never the entry points above it (``zoo``, ``zoo.fit`` ...)."""
    pkg = tmp_path / "zoo"
    for sub in ("bench/run", "diagnostics", "datasets"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
    for init in ("", "bench", "bench/run", "diagnostics", "datasets"):
        (pkg / init / "__init__.py").write_text("")
    (pkg / "fitting.py").write_text("")
    (pkg / "graph.py").write_text("")
    (pkg / "bench" / "run" / "driver.py").write_text("import zoo\n")
    (pkg / "diagnostics" / "diagnose.py").write_text("def f():\n    from zoo import fitting\n")
    (pkg / "datasets" / "user.py").write_text("from zoo.graph import x\n")
    edges, _ = import_graph(pkg)
    assert backward_imports(edges) == [
        "zoo.bench.run.driver -> zoo (zoo.bench may import only " + str(sorted(ROOMS["zoo.bench"])) + ")",
        "zoo.datasets.user -> zoo.graph (zoo.datasets may import only ['leaves'])",
        "zoo.diagnostics.diagnose -> zoo.fitting (zoo.diagnostics may import only "
        + str(sorted(ROOMS["zoo.diagnostics"])) + ")"]
    edges, _ = import_graph()
    assert backward_imports(edges) == []


def test_trainer_imports_nothing_from_bench(tmp_path: Path) -> None:
    """The training layer is under zoo.bench and zoo.fit: a module of zoo/trainer that imports
    either (at module or function level, absolutely or relatively) is reported."""
    pkg = tmp_path / "zoo"
    for sub in ("trainer", "bench", "bench/run"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fitting.py").write_text("from zoo.trainer import loop\n")
    (pkg / "bench" / "run" / "driver.py").write_text("from zoo.trainer.loop import train\n")
    (pkg / "trainer" / "loop.py").write_text("def train():\n    from ..bench.run import driver\n")
    (pkg / "trainer" / "state.py").write_text("import zoo.fitting\n")
    edges, _ = import_graph(pkg)
    assert trainer_imports_from_above(edges) == ["zoo.trainer.loop -> zoo.bench.run.driver",
                                                 "zoo.trainer.state -> zoo.fitting"]
    edges, _ = import_graph()
    assert any(_within(m, TRAINER) for m in edges), "the training layer exists"
    assert trainer_imports_from_above(edges) == []


def test_fit_does_not_sit_on_the_runner() -> None:
    """``zoo.fit`` and the runner share the training layer's cell adapter (``zoo.trainer.cells``):
    the library entry point imports nothing from the runner (``zoo.bench.run``), at any level."""
    edges, _ = import_graph()
    assert "zoo.trainer.cells" in edges["zoo.fitting"]
    assert sorted(t for t in edges["zoo.fitting"] if _within(t, "zoo.bench.run")) == []


def test_no_function_level_imports_in_bench() -> None:
    """Inside zoo/bench/ a function-level import is allowed only for an optional dependency."""
    _, raw = import_graph()
    lazy = sorted({f"{module}:{line} imports {target}" for module, found in raw.items()
                   if module.startswith("zoo.bench") for target, line, in_function in found
                   if in_function and target.split(".")[0] not in OPTIONAL
                   and (module, target) not in LAZY_FOR_STARTUP})
    assert lazy == []


def test_torch_free_layers_do_not_import_torch() -> None:
    """Statically (no module of these layers names torch) and at run time (importing every module
    of them, with the parent packages Python initialises, leaves torch out of sys.modules)."""
    _, raw = import_graph()
    named = sorted(f"{m}:{line}" for m, found in raw.items() if m.startswith(TORCH_FREE)
                   for target, line, _ in found if target.split(".")[0] == "torch")
    assert named == []
    code = ("import importlib, pkgutil, sys\n"
            f"for name in {TORCH_FREE!r}:\n"
            "    pkg = importlib.import_module(name)\n"
            "    for m in pkgutil.iter_modules(getattr(pkg, '__path__', [])):  # a package: each module\n"
            "        importlib.import_module(f'{name}.{m.name}')\n"
            "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
            "assert not loaded, loaded[:5]\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_lazy_subpackage_of_zoo_is_a_module() -> None:
    """``zoo.<name>`` for each name ``zoo.__getattr__`` offers as a subpackage finds a module
    (a stale name, such as a removed ``train``, would raise ModuleNotFoundError on first use)."""
    import importlib.util

    import zoo

    assert [n for n in zoo._SUBPACKAGES if importlib.util.find_spec(f"zoo.{n}") is None] == []


def _summary() -> str:
    edges, _ = import_graph()
    rooms: Dict[Tuple[str, str], int] = defaultdict(int)

    def room(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:3]) if parts[:2] == ["zoo", "bench"] else ".".join(parts[:2])

    for a, targets in edges.items():
        for b in targets:
            if room(a) != room(b):
                rooms[(room(a), room(b))] += 1
    lines = [f"{a} -> {b} ({n})" for (a, b), n in sorted(rooms.items())]
    found = cycles(edges)
    lines.append(f"cycles: {len(found)}")
    lines += ["  " + " <-> ".join(c) for c in found]
    return "\n".join(lines)


if __name__ == "__main__":
    print(_summary())


def test_the_runner_runs_search_points_as_cells_and_selects_nothing() -> None:
    """A suite's [search] is expanded by the suite layer (every point its own cells) and decided by the
    analysis (zoo.bench.analyze.best_point); the run layer names neither the search nor its selection
    metric, so a partial search can never be selected while it runs."""
    edges, _ = import_graph()
    run = {m: t for m, t in edges.items() if m == "zoo.bench.run" or m.startswith("zoo.bench.run.")}
    assert run, "the run layer exists"
    assert [m for m, t in run.items() if t & {"zoo.bench.suite.search_space", "zoo.bench.analyze.best_point"}] == []
    named = [p.name for p in (PACKAGE / "bench" / "run").glob("*.py") if "search" in p.read_text()]
    assert named == []
