"""``zoo bench --set KEY=VALUE``: a stated-reduced protocol (e.g. fewer epochs) applied to a suite's cells.

Settings are set in every cell after the overrides and the search point; they change the cells'
configurations, hence their ids, and are recorded with the values they replaced.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from zoo._names import close_matches
from zoo.bench.suite import plugins as registries
from zoo.bench.suite.builds import build_error, model_key
from zoo.bench.suite.cells import cell_value, matches
from zoo.bench.suite.resolve import resolve_cell
from zoo.bench.suite.schema import (FIXED_BY_TASK, KEY_TYPES, PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS, Cell,
                                    Points, SuiteError, cell_id, group_id)

#: Keys that pick which experiment a cell is, not how it is trained: ``--where`` selects by them.
IDENTITY_KEYS = ("seed", "variant", "model", "dataset")


def cells_with_settings(source: str, points: Points, grid: Mapping[str, Any], board: Mapping[str, Any],
                        settings: Mapping[str, Any], where: Optional[Mapping[str, Sequence[Any]]],
                        tuned: Sequence[str]) -> Tuple[List[Cell], Dict[str, List[Any]]]:
    """The suite's cells (``settings`` applied) and, per ``--set`` key, the values it replaced.

    ``--set`` applies to the cells ``--where`` selects (all without ``--where``) and is checked
    against those: an option of one dataset need not exist for the datasets that are not run.
    """
    resolved = [resolve_cell(f"{source} cell {point}", flat) for point, flat in points]
    chosen = [not where or matches(config, where) for config in resolved]
    if not any(chosen):  # a --where that selects nothing is reported by the selection, with its own message
        chosen = [True] * len(resolved)
    if settings:
        check_settings(settings, grid, board, [flat for (_, flat), c in zip(points, chosen) if c], tuned=tuned)
    cells: List[Cell] = []
    seen: Dict[str, int] = {}
    plain: List[Dict[str, Any]] = []  # the cells without the settings: what they replace
    reduced: List[Dict[str, Any]] = []
    ids = {cell_id(config) for config in resolved}
    buildable: Dict[str, bool] = {}
    for (point, flat), config, selected in zip(points, resolved, chosen):
        label = f"{source} cell {point}"
        if settings and selected:
            plain.append(config)
            label += f" with --set {format_settings(settings)}"
            config = resolve_cell(label, {**flat, **settings})
            reduced.append(config)
        elif settings:
            # An unselected cell gets the settings too where they apply, so that the resolved suite (and a
            # folder's cell ids) does not depend on --where: a later --where slice of the same --set run resumes
            # into the same folder.  Where they do not apply (an option its dataset lacks, a value its model
            # rejects), it stays as it is.
            reduced_config = _with_settings_if_valid(label, flat, config, settings, grid, board, tuned, ids, buildable)
            config = config if cell_id(reduced_config) in seen else reduced_config
        cid = cell_id(config)
        if cid in seen:
            why = "the --set values make two grid points one config" if settings else \
                "two grid points resolve to one config"
            raise SuiteError(f"{label}: duplicates cell #{seen[cid] + 1} ({why})")
        seen[cid] = len(cells)
        cells.append(Cell(cid, group_id(config), config))
    if not cells:
        raise SuiteError(f"{source}: the grid expands to no cells (everything excluded?)")
    return cells, replaced_values(settings, plain, reduced)

def _with_settings_if_valid(label: str, flat: Mapping[str, Any], config: Dict[str, Any], settings: Mapping[str, Any],
                            grid: Mapping[str, Any], board: Mapping[str, Any], tuned: Sequence[str],
                            plain_ids: Set[str], buildable: Dict[str, bool]) -> Dict[str, Any]:
    """``config`` with ``settings`` applied when they are valid for this cell, its model builds with them
    (``buildable`` caches that per model) and they make it no other plain cell."""
    try:
        check_settings(settings, grid, board, [flat], tuned=tuned)
        reduced = resolve_cell(f"{label} with --set {format_settings(settings)}", {**flat, **settings})
    except SuiteError:
        return config
    if cell_id(reduced) in plain_ids:
        return config
    # A value the model rejects (heads = 8 on GCN) does not apply either; distinct models are few, so each
    # is built once.
    key = model_key(reduced["model"])
    if key not in buildable:
        buildable[key] = build_error(reduced["model"]) is None
    return reduced if buildable[key] else config


def check_settings(settings: Mapping[str, Any], grid: Mapping[str, Any], board: Mapping[str, Any],
                   flats: Sequence[Mapping[str, Any]], tuned: Sequence[str] = ()) -> None:
    """``--set`` keys must be cell keys that change the protocol (epochs, warm-up, ...) for every cell.

    Grid axes, seeds, and the leaderboard's rows / columns / tables select *cells*: setting one
    would fold different experiments into one, so the error points at ``--where``.  Unknown keys
    list close matches; values get the suite file's type checks.
    """
    def bare(key: Any) -> Any:
        return key.split(".", 1)[1] if isinstance(key, str) and key.startswith(("arch.", "data.")) else key

    axes = {bare(k) for k in grid}
    board_keys = {bare(k) for k in (*board.get("rows", []), board.get("columns"), board.get("table_by")) if k}
    valid = set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)
    for model, dataset in {(str(f.get("model")), str(f.get("dataset"))) for f in flats}:
        try:
            opts = [k for k in registries.model_options(registries.canonical_name("model", model)) if k not in FIXED_BY_TASK]
            data = list(registries.dataset_options(registries.canonical_name("dataset", dataset)))
        except (ValueError, KeyError):  # a bad name: resolving the cell reports it
            continue
        valid |= set(opts) | set(data) | {f"arch.{k}" for k in opts} | {f"data.{k}" for k in data}
    for key, value in settings.items():
        name = bare(key)
        if name in {bare(k) for k in tuned}:
            raise SuiteError(f"--set {key}: {key!r} is a [search] axis (tuned per cell, each value its own runs); "
                             f"run some of its values with --where {key}=V1[,V2] instead")
        if name in axes or name in board_keys or name in IDENTITY_KEYS:
            what = "a grid axis" if name in axes else "a leaderboard key" if name in board_keys else \
                "what names an experiment"
            raise SuiteError(f"--set {key}: {key!r} is {what}, so it selects cells rather than changing the "
                             f"protocol; run part of the suite with --where {key}=V1[,V2] instead. --set changes "
                             "how every cell is trained (e.g. --set epochs=200 --set warmup_epochs=20).")
        if key not in valid:
            near = close_matches(key, sorted(valid))
            raise SuiteError(f"--set: unknown key {key!r}" + (f" (did you mean {' or '.join(map(repr, near))}?)"
                                                               if near else "")
                             + f". Valid keys: {', '.join(sorted(valid))}.")
        types = KEY_TYPES.get(key)
        if types and value is not None and not (isinstance(value, types)
                                                and not (isinstance(value, bool) and bool not in types)):
            raise SuiteError(f"--set {key}: must be {' or '.join(t.__name__ for t in types)}, got {value!r} "
                             "(values are TOML literals: 200, 0.5, true, [2, 32, 64], \"add\")")


def replaced_values(settings: Mapping[str, Any], plain: Sequence[Mapping[str, Any]],
                    reduced: Sequence[Mapping[str, Any]]) -> Dict[str, List[Any]]:
    """Per ``--set`` key, the distinct values the unreduced cells had (sorted); a key that changes
    no cell is an error (it would state a reduction that did not happen)."""
    def value(config: Mapping[str, Any], key: str) -> Any:
        model = config["model"]
        return model.get(key) if key in PLUGIN_KEYS and key != "model" else cell_value(dict(config), key)

    out: Dict[str, List[Any]] = {}
    for key in settings:
        before = [value(c, key) for c in plain]
        after = [value(c, key) for c in reduced]
        if before == after:
            raise SuiteError(f"--set {key}={_literal(settings[key])} changes no cell: the suite already has "
                             f"{key}={_literal(before[0])}; drop it")
        distinct: Dict[str, Any] = {}
        for v in before:
            distinct.setdefault(json.dumps(v, sort_keys=True, default=str), v)
        out[key] = sorted(distinct.values(), key=lambda v: (0, v, "") if isinstance(v, (int, float)) and
                          not isinstance(v, bool) else (1, 0, json.dumps(v, sort_keys=True, default=str)))
    return out


def _literal(value: Any) -> str:
    """A value as one writes it after ``--set KEY=``: 200, 0.5, true, [2, 32, 64], bal_o."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def format_settings(settings: Mapping[str, Any], replaced: Optional[Mapping[str, Sequence[Any]]] = None) -> str:
    """``epochs=200 (suite: 5000), warmup_epochs=20 (suite: 500)`` (keys sorted; without ``replaced``,
    just ``epochs=200, warmup_epochs=20``)."""
    parts = []
    for key in sorted(settings):
        was = (replaced or {}).get(key)
        parts.append(f"{key}={_literal(settings[key])}"
                     + (f" (suite: {', '.join(_literal(v) for v in was)})" if was else ""))
    return ", ".join(parts)


def describe_settings(info: Mapping[str, Any]) -> str:
    """The ``--set`` part of a resolved suite (``suite.resolved.json``) in words; ``""`` without one."""
    return format_settings(info.get("set") or {}, info.get("set_replaces") or {})
