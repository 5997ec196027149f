"""Choosing part of a suite: ``--where KEY=V1[,V2]`` slices (``--shard I/N``: :mod:`zoo.bench.plan.shards`).

A slice selects *cells of the full suite*: run ids stay the full suite's, so a slice and a
later full run into the same folder share their records (the full run skips what is done).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from zoo._names import close_matches, normalize_name
from zoo._toml import tomllib
from zoo.bench.suite.cells import cell_value, comparable
from zoo.bench.suite.plugins import dataset_spec
from zoo.bench.suite.resolve import canonical_split
from zoo.bench.suite.search_space import search_tables
from zoo.bench.suite.schema import PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS, Cell, Suite


class SelectionError(ValueError):
    """A ``--where`` or ``--shard`` argument that selects nothing or cannot be read."""


# --------------------------------------------------------------------------- --where


def parse_where(items: Sequence[str]) -> Dict[str, List[Any]]:
    """``["dataset=cora", "num_layers=2,5"]`` -> ``{"dataset": ["cora"], "num_layers": [2, 5]}``.

    Values are read as TOML scalars (``2``, ``0.5``, ``true``), bare words as strings; a key
    given twice is an error (give all its values in one ``KEY=V1,V2``).
    """
    out: Dict[str, List[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or not raw.strip():
            raise SelectionError(f"--where takes KEY=V1[,V2,...], got {item!r} (e.g. --where dataset=cora)")
        if key in out:
            raise SelectionError(f"--where {key} is given twice; write --where {key}=V1,V2")
        values = []
        for part in raw.split(","):
            part = part.strip()
            try:
                values.append(tomllib.loads(f"v = {part}")["v"])
            except Exception:
                values.append(part)
        out[key] = values
    return out


_norm = comparable  # one definition: parse_suite applies --set to the cells this selects


def _holds(cell: Cell, key: str, value: Any) -> bool:
    """Whether ``cell`` has ``--where key=value``; a split in the one form its dataset's cells hold it
    (``split=per_class`` finds the Amazon cells, whose config holds ``None``, and not Cora's public split)."""
    if key == "split":
        try:
            value = canonical_split(cell.config["task"]["dataset"], value)
        except (TypeError, ValueError):  # not a split of this dataset: compared as given
            pass
    return repr(_norm(value)) == repr(_norm(cell_value(cell.config, key)))


def _suite_keys(suite: Suite) -> List[str]:
    """Keys a suite file sets (defaults, grid, variants, overrides, quick) plus the fixed cell keys."""
    raw = suite.raw or {}
    keys = set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)
    tables = [raw.get("defaults") or {}, raw.get("grid") or {}, *(raw.get("variants") or {}).values(),
              *(o for o in raw.get("override") or []), *((raw.get("quick") or {}).get(t) or {} for t in
                                                          ("defaults", "grid")),
              *({k: v for k, v in t.items() if k != "metric"} for t in search_tables(raw.get("search")))]
    for t in tables:
        for k, v in t.items():
            if k in ("arch", "data") and isinstance(v, dict):
                keys.update(f"{k}.{kk}" for kk in v)
            elif k != "when":
                keys.add(k)
    for c in suite.cells:
        keys.update(c.config["model"]["kwargs"])
        keys.update(c.config["task"]["options"])
    return sorted(keys)


def varying_keys(suite: Suite) -> List[str]:
    """Suite keys whose value differs between cells (what a slice usually picks by)."""
    out = []
    for k in _suite_keys(suite):
        if len({repr(_norm(cell_value(c.config, k))) for c in suite.cells}) > 1:
            out.append(k)
    return out


def select_where(suite: Suite, where: Mapping[str, Sequence[Any]]) -> List[Cell]:
    """The cells matching every ``--where`` clause (values of one key are alternatives)."""
    if not where:
        return list(suite.cells)
    valid = _suite_keys(suite)
    cells = list(suite.cells)
    for key, values in where.items():
        if key not in valid:
            near = close_matches(key, valid)
            raise SelectionError(
                f"--where: unknown key {key!r}" + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else "")
                + f". Keys that vary in suite {suite.name!r}: {', '.join(varying_keys(suite)) or '(none)'}; "
                f"every cell key is accepted: {', '.join(valid)}.")
        have = {}
        for c in suite.cells:
            v = cell_value(c.config, key)
            have.setdefault(repr(_norm(v)), v)
        shown = ", ".join(sorted(str(v) for v in have.values()))
        for v in values:
            if not (any(_holds(c, key, v) for c in suite.cells) if key == "split" else repr(_norm(v)) in have):
                raise SelectionError(f"--where {key}={v}: no cell of suite {suite.name!r} has {key}={v}. "
                                     f"Its values of {key}: {shown}.")
        if key == "split":  # a split's spelling is its one form for each cell's own dataset
            cells = [c for c in cells if any(_holds(c, key, v) for v in values)]
        else:
            wanted = {repr(_norm(v)) for v in values}
            cells = [c for c in cells if repr(_norm(cell_value(c.config, key))) in wanted]
    if not cells:
        clauses = " ".join(f"--where {k}={','.join(map(str, v))}" for k, v in where.items())
        raise SelectionError(f"{clauses}: every value exists in suite {suite.name!r}, but no cell matches all "
                             "clauses together; loosen one of them")
    return cells
