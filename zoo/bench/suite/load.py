"""Declarative benchmark suites (TOML): schema, strict validation and expansion into cells.

A suite file has these tables (``docs/benchmarks.md`` has the full reference)::

    [suite]        name, title, paper, tables, description, reported, mode, notes
    [defaults]     cell keys shared by every cell
    [grid]         cell key -> list of values; the cells are the Cartesian product
    [variants.X]   named bundles of cell keys, chosen by the grid axis ``variant``
    [[override]]   ``when = {key = value | [values]}`` plus cell keys set where it matches
    [[exclude]]    ``when = {...}``: grid points matching it (before overrides) are dropped
    [search]       cell key -> list of values tuned per cell (+ ``when``, ``metric``); several as
                   [[search]] tables: :mod:`zoo.bench.suite.search_space`
    [quick]        ``defaults``, ``grid`` (replaces axes), ``override``: the ``--quick`` form
    [leaderboard]  rows, columns, metric, table_by, scale

Cell keys are flat; their schema is :mod:`zoo.bench.suite.schema`.

Precedence: defaults < quick.defaults < grid point < variant < overrides (in file order) < search
point < settings (``zoo bench --set KEY=VALUE``: a stated-reduced protocol, e.g. fewer epochs; see
:func:`zoo.bench.suite.settings.check_settings`).

:func:`parse_suite` runs the steps: the header and tables (:mod:`zoo.bench.suite.expand`), the grid
and search points, each cell resolved (:mod:`zoo.bench.suite.resolve`) with ``--set`` applied
(:mod:`zoo.bench.suite.settings`), the leaderboard keys checked, dry builds
(:mod:`zoo.bench.suite.builds`) and the reported numbers (:mod:`zoo.bench.suite.reported`).
"""
from __future__ import annotations

import importlib.resources as resources
import importlib.util
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from zoo._names import normalize_name, unknown_name_error
from zoo._toml import tomllib
from zoo.bench.suite import plugins as registries
from zoo.bench.suite.builds import check_init_compatibility, dry_build
from zoo.bench.suite.expand import (check_board_keys, check_overrides_and_excludes, grid_points, read_header,
                                    read_search, read_tables, search_points)
from zoo.bench.suite.measures import mode_spec
from zoo.bench.suite.reported import load_reported
from zoo.bench.suite.schema import Cell, Suite, SuiteError
from zoo.bench.suite.settings import cells_with_settings
from zoo._user_modules import import_modules


# --------------------------------------------------------------------------- locating suites


def suites_dir() -> Path:
    """The shipped suites: package ``zoo._suites`` (= ``benchmarks/suites`` in a source tree).

    A source tree's own ``benchmarks/suites`` comes first: an editable install maps ``zoo._suites``
    to the checkout it was installed from, which is not this one in a second worktree."""
    beside = Path(__file__).resolve().parents[3] / "benchmarks" / "suites"
    if (beside / "__init__.py").is_file() and any(beside.glob("*.toml")):
        return beside
    if importlib.util.find_spec("zoo._suites") is not None:
        return Path(str(resources.files("zoo._suites")))
    return Path(__file__).resolve().parents[3] / "benchmarks" / "suites"  # a source tree that is not installed


def list_suites() -> List[str]:
    return sorted(p.stem for p in suites_dir().glob("*.toml"))


def suite_titles() -> List[Tuple[str, str]]:
    """``[(name, title)]`` of the shipped suites, from their ``[suite]`` tables (nothing expanded)."""
    out = []
    for name in list_suites():
        try:
            with open(suites_dir() / f"{name}.toml", "rb") as fh:
                title = str(tomllib.load(fh).get("suite", {}).get("title", ""))
        except (OSError, tomllib.TOMLDecodeError) as e:  # a broken suite file is listed, not fatal
            title = f"(cannot be read: {e})"
        out.append((name, title))
    return out


def find_suite(name_or_path: Union[str, Path]) -> Path:
    """A suite file: a ``.toml`` path, a shipped suite's name, or another existing path.  A bare name
    of a shipped suite is that suite even where the working directory holds something of that name
    (``zoo bench quick --out quick`` run twice)."""
    if isinstance(name_or_path, str) and name_or_path.startswith("~"):
        name_or_path = os.path.expanduser(name_or_path)
    p = Path(name_or_path)
    shipped = suites_dir() / f"{normalize_name(str(name_or_path))}.toml"
    if p.suffix != ".toml" and str(name_or_path) == p.name and shipped.is_file():
        return shipped
    if p.suffix == ".toml" or p.exists():
        if p.is_dir():
            raise SuiteError(f"{p} is a directory, not a suite file; pass a .toml file or a suite name "
                             "(`zoo list suites`)")
        if not p.is_file():
            raise SuiteError(f"suite file {p} does not exist")
        return p
    raise unknown_name_error("suite", str(name_or_path), list_suites(),
                             hint="Pass a suite name (`zoo list suites`) or a path to a .toml file.")


def load_suite(name_or_path: Union[str, Path], quick: bool = False, validate_models: bool = True,
               settings: Optional[Mapping[str, Any]] = None,
               where: Optional[Mapping[str, Sequence[Any]]] = None) -> Suite:
    """Read, validate and expand a suite (``quick=True`` applies its ``[quick]`` table; ``settings``
    are ``--set`` values applied to every cell after everything else — with ``where`` (``--where``),
    to the cells it selects, and checked against those only)."""
    path = find_suite(name_or_path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise SuiteError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError:
        raise SuiteError(f"{path}: not a text (UTF-8 TOML) file; pass a suite .toml file") from None
    except OSError as e:
        raise SuiteError(f"cannot read suite file {path}: {e.strerror or e}") from None
    return parse_suite(raw, quick=quick, source=str(path), validate_models=validate_models, settings=settings,
                       where=where)


# --------------------------------------------------------------------------- parse + expand


def _check_mode_keys(source: str, meta: Mapping[str, Any], cells: Sequence[Cell]) -> None:
    """Run keys that only one mode reads: refused in the others rather than silently ignored."""
    mode = meta.get("mode", "train")
    if mode != "energy_at_init" and any("energy_forward" in c.config["run"] for c in cells):
        raise SuiteError(f"{source}: energy_forward applies to mode = \"energy_at_init\" only (this suite's mode is "
                         f"{mode!r}); remove it")
    _check_one_graph(source, mode, cells)


def _check_one_graph(source: str, mode: str, cells: Sequence[Cell]) -> None:
    """A mode that measures one graph (``ModeSpec.one_graph``) is refused on graph-list datasets here, before
    any group is built, rather than failing group by group."""
    if not mode_spec(mode).one_graph:
        return
    for dataset in sorted({c.config["task"]["dataset"] for c in cells}):
        kind = registries.dataset_spec(dataset).kind
        if kind != "transductive":
            raise SuiteError(f"{source}: mode {mode!r} measures one graph: it needs transductive datasets, and "
                             f"{dataset!r} is {kind}")


def _import_plugins(source: str, plugins: Any) -> None:
    """``plugins = ["mymodule", "datasets.py"]``: the user's modules that register the suite's datasets and
    models, imported before its cells are resolved (files relative to the suite file; workers import them too)."""
    if plugins is None:
        return
    if not (isinstance(plugins, list) and all(isinstance(p, str) and p for p in plugins)):
        raise SuiteError(f"{source} [suite]: plugins must be a list of module names or .py files, got {plugins!r}")
    base = Path(source).parent if Path(source).is_file() else None
    try:
        import_modules(plugins, base)
    except ValueError as e:
        raise SuiteError(f"{source} [suite]: plugins: {e}") from None


def parse_suite(raw: Dict[str, Any], quick: bool = False, source: str = "<suite>",
                validate_models: bool = True, settings: Optional[Mapping[str, Any]] = None,
                where: Optional[Mapping[str, Sequence[Any]]] = None, check_inits: bool = True) -> Suite:
    """Validate a suite's tables and expand them into cells (see the module docstring).

    ``settings`` (``zoo bench --set``) are set in every cell after the overrides; they change the
    cells' configurations, hence their ids, and are recorded with the values they replaced.
    ``check_inits``: refuse a cell whose init does not apply to its architecture
    (:func:`zoo.bench.suite.builds.check_init_compatibility`); off only for a caller that excludes such cells itself."""
    with registries.fingerprint_scope():  # a registered dataset's data is hashed once per recipe
        return _parse(raw, quick, source, validate_models, settings, where, check_inits)


def _parse(raw: Dict[str, Any], quick: bool, source: str, validate_models: bool,
           settings: Optional[Mapping[str, Any]], where: Optional[Mapping[str, Sequence[Any]]],
           check_inits: bool) -> Suite:
    meta, board = read_header(raw, source)
    _import_plugins(source, meta.get("plugins"))
    tables = read_tables(raw, source, quick)
    search = read_search(raw, source, tables, board)
    if quick:  # the quick form checks that the suite runs: its own point only
        search = None
    check_overrides_and_excludes(source, tables)
    points = grid_points(source, tables)
    if search is not None:
        points = search_points(source, search, points)
    settings = dict(settings or {})
    tuned = list(search.axes) if search is not None else ()
    cells, replaced = cells_with_settings(source, points, tables.grid, board, settings, where, tuned)
    check_board_keys(source, board, cells)
    _check_mode_keys(source, meta, cells)
    if validate_models:
        dry_build(source, cells)
    if check_inits:
        check_init_compatibility(source, cells)
    reported = None
    if meta.get("reported"):
        reported = load_reported(Path(source).parent / meta["reported"] if source != "<suite>" else Path(meta["reported"]))
    return Suite(name=normalize_name(meta["name"]), meta=meta, leaderboard=board, cells=cells, quick=quick,
                 path=source, reported=reported, raw=raw, settings=settings, replaced=replaced, search=search)
