"""A suite's ``[search]`` table: hyper-parameters tuned *per cell*, as papers select models (torch-free).

Papers often report, per table cell, the best point of a hyper-parameter grid ("we keep the
configuration with the best average accuracy", LipschitzNorm §10.3).  A ``[grid]`` axis makes
each value its own leaderboard cell; a ``[search]`` axis does not: every search point of a cell
is run as its own cells (same grouping: seeds of one point train as stacked replicas), and the
analysis (:mod:`zoo.bench.analyze.best_point`) keeps, per leaderboard cell, the point with the best
mean of the selection ``metric`` over seeds::

    [search]
    lr = [0.01, 0.005, 0.001]       # axes: cell key = [values], the Cartesian product is the points
    dropout = [0.0, 0.5]
    when = { variant = ["gat"] }    # optional: the cells searched (tested after the overrides); others run once
    metric = "val"                  # optional: what selects the point (default: the leaderboard's metric)

Cells tuned over different axes take one table each, as ``[[search]]`` (an array of tables, each
with its own ``when``; one selection ``metric`` for the suite)::

    [[search]]
    lr = [0.005, 0.001, 0.01]
    when = { variant = ["gat_code"] }
    [[search]]
    heads = [1, 8]
    when = { variant = ["gat", "gat_lip"] }

A cell is tuned by at most one table (a cell two tables select is an error: merge their axes).
A search point's values are set after the overrides (they are what is tuned) and before
``--set``.  Where a point's value equals what the cell has without the search, the key is left
out, so the point that equals the suite's own configuration keeps that configuration's cell id
and existing records count.  The ``--quick`` form runs the suite's own point only.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.suite.cells import cell_value, comparable
from zoo.bench.suite.measures import metric_spec

#: Keys of ``[search]`` that are not axes.
SEARCH_OPTIONS = ("when", "metric")
#: Metrics a search may select by: accuracies (higher is better) read at one selected state.
SELECTION_METRICS = ("val", "train", "test")
#: Keys that say which experiment a cell is, so they cannot be tuned.
NOT_TUNABLE = ("seed", "variant", "model", "dataset", "init", "init_kwargs", "prune_layers")


class SearchError(ValueError):
    """An invalid ``[search]`` table; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class SearchTable:
    """One ``[search]`` / ``[[search]]`` table: its axes and the cells it tunes."""

    axes: Dict[str, List[Any]]  # cell key -> values, in file order
    when: Dict[str, Any]        # the cells searched (empty: every cell)

    def points(self) -> List[Dict[str, Any]]:
        """Every search point (the axes' Cartesian product, in file order)."""
        keys = list(self.axes)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.axes[k] for k in keys))]

    def to_json(self) -> Dict[str, Any]:
        # "order": the file's axis order (the resolved file is written with sorted keys)
        return {"axes": {k: list(v) for k, v in self.axes.items()}, "order": list(self.axes), "when": dict(self.when)}


@dataclass(frozen=True)
class Search:
    """A suite's parsed search: one table (``[search]``) or several (``[[search]]``), one metric."""

    tables: Tuple[SearchTable, ...]
    metric: str                 # the selection metric (recorded metric name)

    @property
    def axes(self) -> Dict[str, List[Any]]:
        """Every table's axes (a key in several tables: its values in first-seen order)."""
        out: Dict[str, List[Any]] = {}
        for table in self.tables:
            for key, values in table.axes.items():
                seen = out.setdefault(key, [])
                seen += [v for v in values if v not in seen]
        return out

    def table_for(self, matches: Callable[[Mapping[str, Any]], bool], label: str) -> Optional[SearchTable]:
        """The table that tunes a cell (``matches(when)``: whether the cell satisfies ``when``); ``None``
        when no table selects it, an error when two do."""
        hits = [i for i, t in enumerate(self.tables) if not t.when or matches(t.when)]
        if len(hits) > 1:
            raise SearchError(f"{label}: [[search]] tables #{hits[0] + 1} and #{hits[1] + 1} both select this cell; "
                              "a cell is tuned by one table (merge their axes into one, or narrow a 'when')")
        return self.tables[hits[0]] if hits else None

    def to_json(self) -> Dict[str, Any]:
        """What ``suite.resolved.json`` stores under ``search`` (the analysis reads it from there): one
        table as ``{axes, order, when, metric}``; several add ``tables`` (each's axes, order and when)
        beside the union of their axes."""
        if len(self.tables) == 1:
            return {**self.tables[0].to_json(), "metric": self.metric}
        axes = self.axes
        return {"axes": axes, "order": list(axes), "metric": self.metric,
                "tables": [t.to_json() for t in self.tables]}


def parse_search(raw: Any, source: str, grid: Mapping[str, Any], board: Mapping[str, Any],
                 flatten: Callable[[str, Mapping[str, Any]], Dict[str, Any]]) -> Optional[Search]:
    """Validate a ``[search]`` table or ``[[search]]`` tables (``None`` when absent).  ``grid`` / ``board``:
    the suite's grid axes and leaderboard layout; ``flatten``: the suite's ``arch = {..}`` / ``data = {..}``
    flattener."""
    if raw is None:
        return None
    many = isinstance(raw, list)
    if not raw or (many and not all(isinstance(t, dict) for t in raw)) or not (many or isinstance(raw, dict)):
        raise SearchError(f"{source} [search]: must be a table of axes (KEY = [values]) with optional 'when' and "
                          "'metric', or [[search]] tables of them")
    tables = raw if many else [raw]
    parsed = [_parse_table(t, f"{source} [[search]] #{i + 1}" if many else f"{source} [search]", grid, board, flatten)
              for i, t in enumerate(tables)]
    metrics = {m for _, m in parsed}
    if len(metrics) > 1:
        raise SearchError(f"{source} [[search]]: the tables select by different metrics ({', '.join(sorted(metrics))}); "
                          "a suite's searched cells are chosen by one metric: give every table the same 'metric'")
    return Search(tables=tuple(t for t, _ in parsed), metric=parsed[0][1])


def _parse_table(raw: Mapping[str, Any], where: str, grid: Mapping[str, Any], board: Mapping[str, Any],
                 flatten: Callable[[str, Mapping[str, Any]], Dict[str, Any]]) -> Tuple[SearchTable, str]:
    axes = flatten(where, {k: v for k, v in raw.items() if k not in SEARCH_OPTIONS})
    if not axes:
        raise SearchError(f"{where}: has no axis; give at least one, e.g. lr = [0.01, 0.005, 0.001]")

    def bare(key: str) -> str:
        return key.split(".", 1)[1] if key.startswith(("arch.", "data.")) else key

    grid_keys = {bare(k) for k in grid}
    board_keys = {bare(k) for k in (*board.get("rows", []), board.get("columns"), board.get("table_by"))
                  if isinstance(k, str)}
    for key, values in axes.items():
        if not isinstance(values, list) or len(values) < 2:
            raise SearchError(f"{where}: axis {key!r} must be a list of at least two values to choose from, "
                              f"got {values!r} (a single value belongs in [defaults])")
        seen = [json.dumps(v, sort_keys=True, default=str) for v in values]
        if len(set(seen)) != len(seen):
            raise SearchError(f"{where}: axis {key!r} lists a value twice ({values!r}); give each value once")
        if bare(key) in NOT_TUNABLE:
            raise SearchError(f"{where}: {key!r} names the experiment (seed, variant, model, dataset, init), "
                              "so it cannot be tuned; make it a [grid] axis")
        if bare(key) in grid_keys:
            raise SearchError(f"{where}: {key!r} is also a [grid] axis; a key is either a grid axis (each value "
                              "its own leaderboard cell) or a search axis (tuned per cell), not both")
        if bare(key) in board_keys:
            raise SearchError(f"{where}: {key!r} is a [leaderboard] row, column or table key; a tuned key cannot "
                              "also lay out the leaderboard (drop it from the leaderboard or from [search])")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise SearchError(f"{where}: 'when' must be a table of key = value(s), e.g. when = {{ variant = [\"gat\"] }}")
    metric = raw.get("metric", board.get("metric"))
    if metric not in SELECTION_METRICS:
        raise SearchError(f"{where}: metric must be one of {', '.join(SELECTION_METRICS)} (an accuracy, higher is "
                          f"better), got {metric!r}" + ("" if "metric" in raw else
                                                        " (the [leaderboard] metric; set [search] metric)"))
    shown = board.get("metric")
    if isinstance(shown, str) and (metric_spec(shown).per_layer or metric_spec(shown).geometric):
        raise SearchError(f"{where}: the leaderboard metric {shown!r} is not one number per run on a percent "
                          "scale; a search needs a train, val or test leaderboard")
    return SearchTable(axes={k: list(v) for k, v in axes.items()}, when=dict(when)), metric


def search_tables(raw: Any) -> List[Mapping[str, Any]]:
    """A suite file's raw ``search`` as a list of tables (``[search]``: one; ``[[search]]``: each)."""
    if isinstance(raw, list):
        return [t for t in raw if isinstance(t, dict)]
    return [raw] if isinstance(raw, dict) else []


def point_settings(point: Mapping[str, Any], base: Mapping[str, Any]) -> Dict[str, Any]:
    """The keys of search ``point`` to set in a cell whose resolved configuration without the search
    is ``base``: only those whose value differs (0 == 0.0; a model default counts as the value), so
    the point equal to the suite's own configuration resolves to it exactly: the same cell id."""
    return {k: v for k, v in point.items() if repr(comparable(cell_value(dict(base), k))) != repr(comparable(v))}


def describe_point(point: Mapping[str, Any]) -> str:
    """``lr=0.01, dropout=0.5`` (file order)."""
    return ", ".join(f"{k}={v}" for k, v in point.items())


def searched_keys(search: Optional[Mapping[str, Any]]) -> Sequence[str]:
    """The axes of a resolved suite's ``search`` (``suite.resolved.json``) in file order; empty without one."""
    search = search or {}
    return list(search.get("order") or search.get("axes") or {})
