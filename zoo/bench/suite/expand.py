"""A suite's tables into grid points: the header, the ``[quick]`` form, ``[variants]``, ``[[exclude]]``,
``[[override]]`` and the ``[search]`` points, applied in the order of precedence::

    defaults < quick.defaults < grid point < variant < overrides (in file order) < search point

(``--set`` comes last: :mod:`zoo.bench.suite.settings`; :func:`zoo.bench.suite.load.parse_suite`
runs the steps in order.)  A point is ``(grid point, flat cell keys)``: the grid point labels the
cell in messages, the flat keys are what :func:`zoo.bench.suite.resolve.resolve_cell` resolves.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from zoo._names import close_matches, normalize_name, unknown_name_error
from zoo.bench.suite import plugins as registries
from zoo.bench.suite.measures import METRICS, MODES, metric_spec
from zoo.bench.suite.resolve import resolve_cell
from zoo.bench.suite.schema import (FIXED_BY_TASK, LEADERBOARD_KEYS, META_KEYS, PLUGIN_KEYS, QUICK_KEYS, RUN_KEYS,
                                    TASK_KEYS, TOP_LEVEL, TRAIN_KEYS, Cell, Points, SuiteError, check_keys,
                                    flatten)
from zoo.bench.suite.search_space import Search, SearchError, parse_search, point_settings


@dataclass
class Tables:
    """A suite's expansion tables, flattened (``arch.KEY`` / ``data.KEY``), the quick form applied."""

    defaults: Dict[str, Any]
    grid: Dict[str, Any]
    variants: Dict[str, Any]
    overrides: List[Any]
    excludes: List[Any]

    def known_keys(self) -> Set[str]:
        """The keys some cell sets: what a ``when`` table may test."""
        return set(self.defaults) | set(self.grid) | {k for v in self.variants.values() for k in flatten("", v)}


def read_header(raw: Mapping[str, Any], source: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The file's top-level keys checked; ``[suite]`` (the meta) and ``[leaderboard]`` with its defaults."""
    check_keys(source, raw, TOP_LEVEL)
    meta = dict(raw.get("suite") or {})
    if not meta.get("name"):
        raise SuiteError(f"{source}: [suite] needs a 'name'")
    check_keys(f"{source} [suite]", meta, META_KEYS)
    if meta.get("mode", "train") not in MODES:
        raise SuiteError(f"{source} [suite]: mode must be one of {MODES}, got {meta['mode']!r}")
    board = {"rows": ["model", "init", "norm"], "columns": "num_layers", "metric": "test", "table_by": "dataset",
             "scale": 100.0}
    check_keys(f"{source} [leaderboard]", raw.get("leaderboard") or {}, LEADERBOARD_KEYS)
    board.update(raw.get("leaderboard") or {})
    if board["metric"] not in METRICS:
        raise SuiteError(f"{source} [leaderboard]: metric must be one of {METRICS}, got {board['metric']!r}")
    return meta, board


def _apply_quick(source: str, quick_table: Mapping[str, Any], tables: Tables) -> None:
    """``[quick]``: its defaults added, its grid axes replacing the suite's, its overrides and excludes appended."""
    check_keys(f"{source} [quick]", quick_table, QUICK_KEYS)
    tables.defaults.update(flatten(f"{source} [quick.defaults]", quick_table.get("defaults") or {}))
    qgrid = flatten(f"{source} [quick.grid]", quick_table.get("grid") or {})
    unknown_axes = [k for k in qgrid if k not in tables.grid and k not in tables.defaults]
    if unknown_axes:
        raise SuiteError(f"{source} [quick.grid]: axes {unknown_axes} are not in [grid] or [defaults]; "
                         f"grid axes: {sorted(tables.grid)}")
    for k in qgrid:
        tables.defaults.pop(k, None)
    tables.grid.update(qgrid)
    tables.overrides += list(quick_table.get("override") or [])
    tables.excludes += list(quick_table.get("exclude") or [])


def _check_grid(source: str, tables: Tables) -> None:
    for k, v in tables.grid.items():
        if not isinstance(v, list) or not v:
            raise SuiteError(f"{source} [grid]: axis {k!r} must be a non-empty list, got {v!r}")
    if "variant" in tables.grid:
        for name in tables.grid["variant"]:
            if name not in tables.variants:
                raise unknown_name_error("variant", str(name), tables.variants,
                                         hint=f"Define [variants.{name}] in {source}.")
    elif tables.variants:
        raise SuiteError(f"{source}: [variants] are defined but [grid] has no 'variant' axis to choose them")


def read_tables(raw: Mapping[str, Any], source: str, quick: bool) -> Tables:
    """``[defaults]``, ``[grid]``, ``[variants]``, ``[[override]]``, ``[[exclude]]`` (with ``quick``: the
    ``[quick]`` form applied; without, the ``[quick]`` table still checked)."""
    tables = Tables(defaults=flatten(f"{source} [defaults]", raw.get("defaults") or {}),
                    grid=flatten(f"{source} [grid]", raw.get("grid") or {}),
                    variants=raw.get("variants") or {},
                    overrides=list(raw.get("override") or []), excludes=list(raw.get("exclude") or []))
    if not isinstance(tables.variants, dict) or any(not isinstance(v, dict) for v in tables.variants.values()):
        raise SuiteError(f"{source}: [variants.NAME] tables hold cell keys")
    quick_table = raw.get("quick")
    if quick:
        if not quick_table:
            raise SuiteError(f"{source}: this suite has no [quick] table, so it has no --quick form")
        _apply_quick(source, quick_table, tables)
    elif quick_table is not None:
        check_keys(f"{source} [quick]", quick_table, QUICK_KEYS)
    _check_grid(source, tables)
    return tables


def read_search(raw: Mapping[str, Any], source: str, tables: Tables, board: Mapping[str, Any]) -> Optional[Search]:
    """The ``[search]`` / ``[[search]]`` tables (:mod:`zoo.bench.suite.search_space`), their ``when`` checked."""
    try:
        search = parse_search(raw.get("search"), source, tables.grid, board, flatten)
    except SearchError as e:
        raise SuiteError(str(e)) from None
    known = tables.known_keys()
    for i, table in enumerate(search.tables if search is not None else ()):
        if table.when:
            check_when_keys(f"{source} [[search]] #{i + 1}" if len(search.tables) > 1 else f"{source} [search]",
                            table.when, known)
    return search


def check_overrides_and_excludes(source: str, tables: Tables) -> None:
    known = tables.known_keys()
    for i, o in enumerate(tables.overrides):
        if not isinstance(o, dict) or "when" not in o:
            raise SuiteError(f"{source} [[override]] #{i + 1}: needs a 'when' table and the keys to set")
        check_when_keys(f"{source} [[override]] #{i + 1}", o["when"], known)
    for i, e in enumerate(tables.excludes):
        if not isinstance(e, dict) or set(e) != {"when"}:
            raise SuiteError(f"{source} [[exclude]] #{i + 1}: holds exactly one 'when' table")
        check_when_keys(f"{source} [[exclude]] #{i + 1}", e["when"], known)


def grid_points(source: str, tables: Tables) -> Points:
    """The grid's Cartesian product, each point with its variant and overrides; excluded points dropped."""
    axes = list(tables.grid)
    points: Points = []
    for point in itertools.product(*(tables.grid[a] for a in axes)):
        flat = dict(tables.defaults)
        flat.update(zip(axes, point))
        if "variant" in flat and flat["variant"] is not None:
            flat.update(flatten(f"{source} [variants.{flat['variant']}]", tables.variants[flat["variant"]]))
        if any(when_matches(flat, e["when"]) for e in tables.excludes):  # tested on the grid point, before overrides
            continue
        for o in tables.overrides:
            if when_matches(flat, o["when"]):
                flat.update(flatten(f"{source} [[override]]", {k: v for k, v in o.items() if k != "when"}))
        points.append((dict(zip(axes, point)), flat))
    return points


def search_points(source: str, search: Search, points: Points) -> Points:
    """Each grid point that a search table's ``when`` selects (after the overrides), once per point of
    that table; a point's key is set only where it changes the cell
    (:func:`zoo.bench.suite.search_space.point_settings`)."""
    out: Points = []
    for point, flat in points:
        try:
            table = search.table_for(lambda when: when_matches(flat, when), f"{source} cell {point}")
        except SearchError as e:
            raise SuiteError(str(e)) from None
        if table is None:
            out.append((point, flat))
            continue
        base = resolve_cell(f"{source} cell {point}", flat)
        for values in table.points():
            out.append(({**point, **values}, {**flat, **point_settings(values, base)}))
    return out


def check_board_keys(source: str, board: Dict[str, Any], cells: Sequence[Cell]) -> None:
    """``rows``/``columns``/``table_by`` must name cell keys; an unknown one would pool every run
    into a single ``None`` cell."""
    valid = set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)
    for c in cells:
        opts = [k for k in registries.model_options(c.config["model"]["name"]) if k not in FIXED_BY_TASK]
        data = list(registries.dataset_options(c.dataset))
        valid |= set(opts) | set(data) | {f"arch.{k}" for k in opts} | {f"data.{k}" for k in data}
    rows = board["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, str) for r in rows):
        raise SuiteError(f"{source} [leaderboard]: rows must be a list of cell keys, got {rows!r}")
    keys = [("rows", r) for r in rows]
    if not metric_spec(board["metric"]).per_layer:  # there the columns are the pruned layers; ``columns`` is their label
        keys.append(("columns", board["columns"]))
    if board.get("table_by"):
        keys.append(("table_by", board["table_by"]))
    for what, key in keys:
        if not isinstance(key, str) or key not in valid:
            near = close_matches(key, valid) if isinstance(key, str) else []
            raise SuiteError(f"{source} [leaderboard]: {what} names {key!r}, which is not a cell key"
                             + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                             + f". Valid keys: {', '.join(sorted(valid))}.")


def when_matches(cell: Dict[str, Any], when: Mapping[str, Any]) -> bool:
    for k, v in when.items():
        have = cell.get(k)
        options = v if isinstance(v, list) else [v]
        norm = [normalize_name(o) if isinstance(o, str) else o for o in options]
        h = normalize_name(have) if isinstance(have, str) else have
        if h not in norm:
            return False
    return True


def check_when_keys(where: str, when: Any, known: set) -> None:
    if not isinstance(when, dict) or not when:
        raise SuiteError(f"{where}: 'when' must be a non-empty table of key = value(s)")
    unknown = [k for k in when if k not in known]
    if unknown:
        raise SuiteError(f"{where}: 'when' tests key(s) {unknown} that no cell sets; keys set: {sorted(known)}")
