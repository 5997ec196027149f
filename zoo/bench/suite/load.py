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

Cell keys are flat: trainer keys (``optimizer``, ``lr``, ``epochs``...), run keys (``seed``,
``dtype``...), task keys (``dataset``, ``split``, ``transforms``, ``data_seed``), the plugin keys
of ``zoo.build`` (``model``, ``init``, ``init_kwargs``, ``norm``, ``norm_kwargs``) and every
constructor option of the chosen model and every option of the chosen dataset.  A key that
is both a model and a dataset option must be written ``arch.KEY`` or ``data.KEY``.  Unknown
keys and names are errors that list the valid choices.

Precedence: defaults < quick.defaults < grid point < variant < overrides (in file order) < search
point < settings (``zoo bench --set KEY=VALUE``: a stated-reduced protocol, e.g. fewer epochs; see
:func:`check_settings`).
A cell's ``id`` is a hash of its fully resolved configuration; cells that differ only in
``seed``/``init``/``init_kwargs`` share a ``group`` and are trained as stacked replicas.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.resources as resources
import importlib.util
import itertools
import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from zoo._names import close_matches, normalize_name, unknown_name_error
from zoo._toml import tomllib
from zoo.bench.suite import plugins as registries
from zoo.bench.suite.cells import matches, cell_value
from zoo.trainer.config import OPTIMIZERS, SELECT, TrainConfig
from zoo.bench.suite.measures import METRICS, MODES, metric_spec
from zoo.bench.suite.search_space import Search, SearchError, parse_search, point_settings


class SuiteError(ValueError):
    """A suite file is invalid; the message names the file, the place and the fix."""


TOP_LEVEL = ("suite", "defaults", "grid", "variants", "override", "exclude", "search", "quick", "leaderboard")
META_KEYS = ("name", "title", "paper", "tables", "description", "reported", "mode", "notes")
QUICK_KEYS = ("defaults", "grid", "override", "exclude")
LEADERBOARD_KEYS = ("rows", "columns", "metric", "table_by", "scale")

# data_seed is a task key; keep_best_state is switched on by prune_layers; check_every is how often the
# host reads the stop flags, which changes no number (so it is no cell key: the cell ids stay as they were).
TRAIN_KEYS = {f.name: (f.default_factory() if f.default is MISSING else f.default)  # type: ignore[misc]
              for f in fields(TrainConfig) if f.name not in ("data_seed", "keep_best_state", "check_every")}
# Trainer keys that enter a cell's config only where set (added later: the other cells' ids stay as they were).
OPTIONAL_TRAIN_KEYS = ("lr_scheduler", "lr_scheduler_kwargs", "select_ties")
TASK_KEYS = {"dataset": None, "split": None, "transforms": [], "data_seed": 0}
# readout (graph tasks; zoo.nn.readout) enters a cell's config only where set: other suites' cell ids stay as they were.
PLUGIN_KEYS = {"model": None, "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}, "readout": None}
RUN_KEYS = {"seed": 0, "dtype": "float32", "variant": None, "prune_layers": [], "rescale": None}
# Run keys that enter a cell's config only where set (added later: the other cells' ids stay as they were).
OPTIONAL_RUN_KEYS = ("rescale",)
#: ``rescale``: a dynamic-rescaling criterion (zoo.rescale.CRITERIA; the callback runs with its defaults).
RESCALE_CRITERIA = ("relative_gradients", "weight_norms")
FIXED_BY_TASK = ("in_dim", "out_dim")
GROUP_FREE = ("seed", "init", "init_kwargs")  # what replicas of one group may differ in
DTYPES = ("float32", "float64")
KEY_TYPES: Dict[str, Tuple[type, ...]] = {
    "lr": (int, float), "weight_decay": (int, float), "momentum": (int, float), "warmup_epochs": (int,),
    "epochs": (int,), "patience": (int,), "loss_threshold": (int, float), "batch_size": (int,),
    "data_seed": (int, str), "seed": (int,), "dtype": (str,), "optimizer": (str,), "select": (str,), "select_ties": (str,),
    "patience_on": (str,), "dataset": (str,), "model": (str,), "init": (str,), "norm": (str,),
    "transforms": (list,), "init_kwargs": (dict,), "norm_kwargs": (dict,), "prune_layers": (list,),
    "betas": (list,), "keep_best_state": (bool,), "variant": (str,), "lr_scheduler": (str,),
    "lr_scheduler_kwargs": (dict,), "rescale": (str,),
}


@dataclass
class Cell:
    """One fully resolved configuration (one run)."""

    id: str
    group: str
    config: Dict[str, Any]

    @property
    def seed(self) -> int:
        return int(self.config["run"]["seed"])


@dataclass
class Suite:
    name: str
    meta: Dict[str, Any]
    leaderboard: Dict[str, Any]
    cells: List[Cell]
    quick: bool
    path: Optional[str]
    reported: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    #: ``--set`` values applied to every cell, and the values they replaced (the unreduced suite's, per key)
    settings: Dict[str, Any] = field(default_factory=dict)
    replaced: Dict[str, List[Any]] = field(default_factory=dict)
    #: the ``[search]`` / ``[[search]]`` tables (hyper-parameters tuned per cell); ``None`` without them and in
    #: the --quick form
    search: Optional[Search] = None

    @property
    def mode(self) -> str:
        return self.meta.get("mode", "train")

    def groups(self) -> Dict[str, List[Cell]]:
        out: Dict[str, List[Cell]] = {}
        for c in self.cells:
            out.setdefault(c.group, []).append(c)
        return out

    def resolved(self) -> Dict[str, Any]:
        """A JSON-able description of the expanded suite (stored next to the results)."""
        out = {"name": self.name, "meta": self.meta, "leaderboard": self.leaderboard, "quick": self.quick,
               "path": self.path, "reported": self.reported, "cells": [c.__dict__ for c in self.cells]}
        if self.settings:  # only then: a run without --set resolves exactly as before
            out["set"] = dict(self.settings)
            out["set_replaces"] = {k: list(v) for k, v in self.replaced.items()}
        if self.search is not None:  # likewise: suites without [search] resolve as before
            out["search"] = self.search.to_json()
        return out


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


def find_suite(name_or_path: Union[str, Path]) -> Path:
    """A suite file: a ``.toml`` path, a shipped suite's name, or another existing path.  A bare name
    of a shipped suite is that suite even where the working directory holds something of that name
    (``zoo bench quick --out quick`` run twice)."""
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


# --------------------------------------------------------------------------- validation helpers


#: other libraries' names for the zoo's keys (PyTorch Lightning, PyG examples...): what a typo matcher
#: cannot guess (``learning_rate`` is closer to ``train_ratio`` than to ``lr`` by spelling)
KEY_SYNONYMS = {"learning_rate": "lr", "num_epochs": "epochs", "max_epochs": "epochs", "n_epochs": "epochs",
                "layers": "num_layers", "n_layers": "num_layers", "depth": "num_layers", "hidden": "hidden_dim",
                "hidden_channels": "hidden_dim", "hidden_size": "hidden_dim", "wd": "weight_decay",
                "optim": "optimizer", "dataset_name": "dataset", "initialization": "init", "init_method": "init",
                "normalization": "norm"}


def _check_keys(where: str, got: Mapping[str, Any], valid: Sequence[str]) -> None:
    unknown = [k for k in got if k not in valid]
    if unknown:
        parts = []
        for k in unknown:
            synonym = KEY_SYNONYMS.get(normalize_name(k)) if isinstance(k, str) else None
            near = [synonym] if synonym in valid else close_matches(k, valid)
            parts.append(repr(k) + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""))
        raise SuiteError(f"{where}: unknown key(s) {', '.join(parts)}. Valid keys: {', '.join(sorted(valid))}.")


def _flatten(where: str, table: Mapping[str, Any]) -> Dict[str, Any]:
    """``arch = {heads = 8}`` / ``data = {k = 3}`` -> ``arch.heads`` / ``data.k``."""
    out: Dict[str, Any] = {}
    for k, v in table.items():
        if k in ("arch", "data"):
            if not isinstance(v, dict):
                raise SuiteError(f"{where}: {k!r} is a namespace; write {k}.OPTION = value")
            for kk, vv in v.items():
                out[f"{k}.{kk}"] = vv
        else:
            out[k] = v
    return out


def _normalise_transforms(where: str, value: Any) -> List[Any]:
    if not isinstance(value, list):
        raise SuiteError(f"{where}: transforms must be a list of names or [name, {{options}}] pairs")
    out: List[Any] = []
    for t in value:
        if isinstance(t, str):
            out.append(registries.canonical_transform(t))
        elif isinstance(t, list) and len(t) == 2 and isinstance(t[0], str) and isinstance(t[1], dict):
            out.append([registries.canonical_transform(t[0]), dict(t[1])])
        else:
            raise SuiteError(f"{where}: a transform is a name or a [name, {{options}}] pair, got {t!r}")
    return out


#: ``data_seed = "seed"``: each run draws its random split (and batch order) from its own ``seed``.
DATA_SEED_FOLLOWS_SEED = "seed"


def _data_seed(where: str, value: Any, seed: int) -> int:
    """The cell's resolved data seed: an integer as given, or the run's ``seed`` for ``"seed"``.

    A paper that reports one run on "a random split" measured one draw of split *and*
    initialisation; runs that share one split (the default ``data_seed = 0``) only vary the
    initialisation, so their mean carries that one split's luck (measured: a 2-layer GCN gets 87.4 %
    on Cora's 60/20/20 split 0 and 88.7 / 88.0 % on splits 1 / 2).  The resolved integer is what the
    cell stores, so a ``"seed"`` cell with seed 0 is the ``data_seed = 0`` cell.
    """
    if isinstance(value, str):
        if value != DATA_SEED_FOLLOWS_SEED:
            raise SuiteError(f"{where}: data_seed must be an integer or {DATA_SEED_FOLLOWS_SEED!r} "
                             f"(each run's split drawn from its own seed), got {value!r}")
        return int(seed)
    return value


def _as_declared(key: str, value: Any) -> Any:
    """A trainer value in its field's type: ``loss_threshold = 0`` (an int, as ``--set loss_threshold=0`` parses)
    is the ``0.0`` a suite writes, and one protocol must make one cell id (ids hash the config's JSON)."""
    if isinstance(TRAIN_KEYS[key], float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def resolve_cell(where: str, flat: Dict[str, Any]) -> Dict[str, Any]:
    """Validate one cell's flat keys and return its canonical configuration.

    Returns ``{"task": ..., "model": ..., "train": ..., "run": ...}`` with every value resolved
    (defaults filled in), which is what the run records store.
    """
    if not flat.get("dataset"):
        raise SuiteError(f"{where}: every cell needs a 'dataset' (set it in [defaults] or [grid])")
    if not flat.get("model"):
        raise SuiteError(f"{where}: every cell needs a 'model' (set it in [defaults] or [grid])")
    for k, types in KEY_TYPES.items():
        v = flat.get(k)
        if v is not None and not (isinstance(v, types) and not (isinstance(v, bool) and bool not in types)):
            raise SuiteError(f"{where}: {k!r} must be {' or '.join(t.__name__ for t in types)}, got {v!r}")
    try:
        dataset = registries.canonical_name("dataset", flat["dataset"])
        model = registries.canonical_name("model", flat["model"])
        model_opts = registries.model_options(model)
        data_opts = registries.dataset_options(dataset)
    except ValueError as e:
        raise SuiteError(f"{where}: {e}") from None
    fixed = {**TRAIN_KEYS, **TASK_KEYS, **PLUGIN_KEYS, **RUN_KEYS}
    task: Dict[str, Any] = {"dataset": dataset, "split": None, "transforms": [], "data_seed": 0, "options": {}}
    arch: Dict[str, Any] = {}
    train = {k: v for k, v in TRAIN_KEYS.items() if k not in OPTIONAL_TRAIN_KEYS}
    train["betas"] = list(train["betas"])
    run = {k: v for k, v in RUN_KEYS.items() if k not in OPTIONAL_RUN_KEYS}
    plugins: Dict[str, Any] = {"init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}}
    valid_all = sorted(set(fixed) | {k for k in model_opts if k not in FIXED_BY_TASK} | set(data_opts)
                       | {f"arch.{k}" for k in model_opts} | {f"data.{k}" for k in data_opts})
    for key, value in flat.items():
        if key in FIXED_BY_TASK or key in (f"arch.{k}" for k in FIXED_BY_TASK):
            raise SuiteError(f"{where}: {key!r} is set from the dataset (features / classes); remove it")
        if key.startswith("arch."):
            opt = key[5:]
            if opt not in model_opts:
                raise SuiteError(f"{where}: model {model!r} has no option {opt!r}. "
                                 f"Its options: {', '.join(sorted(model_opts))}.")
            arch[opt] = value
        elif key.startswith("data."):
            opt = key[5:]
            if opt not in data_opts:
                raise SuiteError(f"{where}: dataset {dataset!r} has no option {opt!r}. "
                                 f"Its options: {', '.join(sorted(data_opts)) or '(none)'}.")
            task["options"][opt] = value
        elif key in ("dataset", "model"):
            continue
        elif key in TASK_KEYS:
            task[key] = _normalise_transforms(f"{where}: transforms", value) if key == "transforms" else value
        elif key in PLUGIN_KEYS:
            if key in ("init", "norm", "readout"):
                try:
                    value = registries.canonical_name(key, value)
                except ValueError as e:
                    raise SuiteError(f"{where}: {e}") from None
            plugins[key] = value
        elif key in TRAIN_KEYS:
            train[key] = list(value) if key == "betas" else _as_declared(key, value)
        elif key in RUN_KEYS:
            if key == "rescale" and value not in RESCALE_CRITERIA:
                raise SuiteError(f"{where}: rescale must be one of {', '.join(RESCALE_CRITERIA)}, got {value!r}")
            run[key] = value
        elif key in model_opts and key in data_opts:
            raise SuiteError(f"{where}: {key!r} is an option of model {model!r} and of dataset {dataset!r}; "
                             f"write arch.{key} or data.{key}")
        elif key in model_opts:
            if key in ("norm", "norm_kwargs"):
                plugins[key] = value
            else:
                arch[key] = value
        elif key in data_opts:
            task["options"][key] = value
        else:
            _check_keys(where, {key: value}, valid_all)
    task["data_seed"] = _data_seed(where, task["data_seed"], run["seed"])
    fingerprint = registries.dataset_spec(dataset).fingerprint
    if fingerprint is not None:  # a user's graph: its content, not its name, says which data the cell ran on
        task["fingerprint"] = fingerprint
    _check_split(where, dataset, task["split"])
    try:  # a switch takes true/false only: "False" or "no" would switch a transform on
        registries.check_dataset_options(dataset, task["options"])
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{where}: {e}") from None
    if run["dtype"] not in DTYPES:
        raise SuiteError(f"{where}: dtype must be one of {DTYPES}, got {run['dtype']!r}")
    if train["select"] not in SELECT:
        raise SuiteError(f"{where}: select must be one of {SELECT}, got {train['select']!r}")
    if train["patience_on"] not in ("select", "either"):
        raise SuiteError(f"{where}: patience_on must be 'select' or 'either', got {train['patience_on']!r}")
    if normalize_name(train["optimizer"]) not in OPTIMIZERS:
        raise SuiteError(f"{where}: {unknown_name_error('optimizer', train['optimizer'], OPTIMIZERS)}")
    train["optimizer"] = normalize_name(train["optimizer"])
    try:
        TrainConfig(**{**train, "betas": tuple(train["betas"])})
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{where}: {e}") from None
    return {"task": task, "model": {"name": model, **plugins, "kwargs": arch}, "train": train, "run": run}


#: Named splits by dataset family (the loaders' own names; ``zoo/datasets``).  Checked at suite load
#: so that a bad ``split`` fails before any training, not when its group starts.
_RANDOM_SPLITS = ("per_class", "random_per_class", "random", "ratio", "random_ratio")


def valid_splits(dataset: str) -> Tuple[Tuple[str, ...], int]:
    """``(split names, number of integer splits)`` that ``dataset``'s loader accepts."""
    spec = registries.dataset_spec(dataset)
    if spec.kind == "transductive" and not spec.name.startswith("ogb"):
        num = spec.stats.get("num_splits", 0)
        num = num if isinstance(num, int) else 0
        return ("public", *(("geom_gcn",) if num else ()), *_RANDOM_SPLITS), num
    if spec.name == "ogbg_molhiv":
        return ("official", "scaffold"), 0
    if spec.synthetic or "synthetic" in spec.source:
        return ("random",), 0
    return ("official",), 0


def _check_split(where: str, dataset: str, split: Any) -> None:
    if split is None:
        return
    names, num = valid_splits(dataset)
    if isinstance(split, bool) or not isinstance(split, (int, str)):
        raise SuiteError(f"{where}: split must be a split name or an integer, got {split!r}")
    if isinstance(split, int):
        if not 0 <= split < num:
            have = f"has integer splits 0..{num - 1}" if num else "has no numbered splits"
            raise SuiteError(f"{where}: split={split} is out of range: dataset {dataset!r} {have}; "
                             f"named splits: {', '.join(names)}")
        return
    if normalize_name(split) not in names:
        raise SuiteError(f"{where}: {unknown_name_error('split', split, names)} (dataset {dataset!r})")


def _check_board_keys(source: str, board: Dict[str, Any], cells: Sequence[Cell]) -> None:
    """``rows``/``columns``/``table_by`` must name cell keys; an unknown one would pool every run
    into a single ``None`` cell."""
    valid = set(TRAIN_KEYS) | set(TASK_KEYS) | set(PLUGIN_KEYS) | set(RUN_KEYS)
    for c in cells:
        opts = [k for k in registries.model_options(c.config["model"]["name"]) if k not in FIXED_BY_TASK]
        data = list(registries.dataset_options(c.config["task"]["dataset"]))
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


def _matches(cell: Dict[str, Any], when: Mapping[str, Any]) -> bool:
    for k, v in when.items():
        have = cell.get(k)
        options = v if isinstance(v, list) else [v]
        norm = [normalize_name(o) if isinstance(o, str) else o for o in options]
        h = normalize_name(have) if isinstance(have, str) else have
        if h not in norm:
            return False
    return True


def _when_keys_ok(where: str, when: Any, known: set) -> None:
    if not isinstance(when, dict) or not when:
        raise SuiteError(f"{where}: 'when' must be a non-empty table of key = value(s)")
    unknown = [k for k in when if k not in known]
    if unknown:
        raise SuiteError(f"{where}: 'when' tests key(s) {unknown} that no cell sets; keys set: {sorted(known)}")


def cell_id(config: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def group_id(config: Mapping[str, Any]) -> str:
    c = copy.deepcopy(dict(config))
    c["run"] = {k: v for k, v in c["run"].items() if k not in GROUP_FREE}
    c["model"] = {k: v for k, v in c["model"].items() if k not in GROUP_FREE}
    return cell_id(c)


# --------------------------------------------------------------------------- parse + expand


def parse_suite(raw: Dict[str, Any], quick: bool = False, source: str = "<suite>",
                validate_models: bool = True, settings: Optional[Mapping[str, Any]] = None,
                where: Optional[Mapping[str, Sequence[Any]]] = None, check_inits: bool = True) -> Suite:
    """Validate a suite's tables and expand them into cells (see the module docstring).

    ``settings`` (``zoo bench --set``) are set in every cell after the overrides; they change the
    cells' configurations, hence their ids, and are recorded with the values they replaced.
    ``check_inits``: refuse a cell whose init does not apply to its architecture
    (:func:`check_init_compatibility`); off only for a caller that excludes such cells itself."""
    _check_keys(source, raw, TOP_LEVEL)
    meta = dict(raw.get("suite") or {})
    if not meta.get("name"):
        raise SuiteError(f"{source}: [suite] needs a 'name'")
    _check_keys(f"{source} [suite]", meta, META_KEYS)
    if meta.get("mode", "train") not in MODES:
        raise SuiteError(f"{source} [suite]: mode must be one of {MODES}, got {meta['mode']!r}")
    board = {"rows": ["model", "init", "norm"], "columns": "num_layers", "metric": "test", "table_by": "dataset",
             "scale": 100.0}
    _check_keys(f"{source} [leaderboard]", raw.get("leaderboard") or {}, LEADERBOARD_KEYS)
    board.update(raw.get("leaderboard") or {})
    if board["metric"] not in METRICS:
        raise SuiteError(f"{source} [leaderboard]: metric must be one of {METRICS}, got {board['metric']!r}")

    defaults = _flatten(f"{source} [defaults]", raw.get("defaults") or {})
    grid = _flatten(f"{source} [grid]", raw.get("grid") or {})
    overrides = list(raw.get("override") or [])
    excludes = list(raw.get("exclude") or [])
    variants = raw.get("variants") or {}
    if not isinstance(variants, dict) or any(not isinstance(v, dict) for v in variants.values()):
        raise SuiteError(f"{source}: [variants.NAME] tables hold cell keys")
    quick_table = raw.get("quick")
    if quick:
        if not quick_table:
            raise SuiteError(f"{source}: this suite has no [quick] table, so it has no --quick form")
        _check_keys(f"{source} [quick]", quick_table, QUICK_KEYS)
        defaults.update(_flatten(f"{source} [quick.defaults]", quick_table.get("defaults") or {}))
        qgrid = _flatten(f"{source} [quick.grid]", quick_table.get("grid") or {})
        unknown_axes = [k for k in qgrid if k not in grid and k not in defaults]
        if unknown_axes:
            raise SuiteError(f"{source} [quick.grid]: axes {unknown_axes} are not in [grid] or [defaults]; "
                             f"grid axes: {sorted(grid)}")
        for k in qgrid:
            defaults.pop(k, None)
        grid.update(qgrid)
        overrides += list(quick_table.get("override") or [])
        excludes += list(quick_table.get("exclude") or [])
    elif quick_table is not None:
        _check_keys(f"{source} [quick]", quick_table, QUICK_KEYS)

    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise SuiteError(f"{source} [grid]: axis {k!r} must be a non-empty list, got {v!r}")
    if "variant" in grid:
        for name in grid["variant"]:
            if name not in variants:
                raise unknown_name_error("variant", str(name), variants, hint=f"Define [variants.{name}] in {source}.")
    elif variants:
        raise SuiteError(f"{source}: [variants] are defined but [grid] has no 'variant' axis to choose them")

    try:
        search = parse_search(raw.get("search"), source, grid, board, _flatten)
    except SearchError as e:
        raise SuiteError(str(e)) from None
    known = set(defaults) | set(grid) | {k for v in variants.values() for k in _flatten("", v)}
    for i, table in enumerate(search.tables if search is not None else ()):
        if table.when:
            _when_keys_ok(f"{source} [[search]] #{i + 1}" if len(search.tables) > 1 else f"{source} [search]",
                          table.when, known)
    if quick:  # the quick form checks that the suite runs: its own point only
        search = None
    for i, o in enumerate(overrides):
        if not isinstance(o, dict) or "when" not in o:
            raise SuiteError(f"{source} [[override]] #{i + 1}: needs a 'when' table and the keys to set")
        _when_keys_ok(f"{source} [[override]] #{i + 1}", o["when"], known)
    for i, e in enumerate(excludes):
        if not isinstance(e, dict) or set(e) != {"when"}:
            raise SuiteError(f"{source} [[exclude]] #{i + 1}: holds exactly one 'when' table")
        _when_keys_ok(f"{source} [[exclude]] #{i + 1}", e["when"], known)

    axes = list(grid)
    points: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []  # (grid point, flat cell keys)
    for point in itertools.product(*(grid[a] for a in axes)):
        flat = dict(defaults)
        flat.update(zip(axes, point))
        if "variant" in flat and flat["variant"] is not None:
            flat.update(_flatten(f"{source} [variants.{flat['variant']}]", variants[flat["variant"]]))
        if any(_matches(flat, e["when"]) for e in excludes):  # tested on the grid point, before overrides
            continue
        for o in overrides:
            if _matches(flat, o["when"]):
                flat.update(_flatten(f"{source} [[override]]", {k: v for k, v in o.items() if k != "when"}))
        points.append((dict(zip(axes, point)), flat))
    if search is not None:
        points = _search_points(source, search, points)
    settings = dict(settings or {})
    # --set applies to the cells --where selects (all without --where), and is checked against those:
    # an option of one dataset need not exist for the datasets that are not run.
    resolved = [resolve_cell(f"{source} cell {point}", flat) for point, flat in points]
    chosen = [not where or matches(config, where) for config in resolved]
    if not any(chosen):  # a --where that selects nothing is reported by the selection, with its own message
        chosen = [True] * len(resolved)
    tuned = list(search.axes) if search is not None else ()
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
    replaced = replaced_values(settings, plain, reduced)
    _check_board_keys(source, board, cells)
    if validate_models:
        _dry_build(source, cells)
    if check_inits:
        check_init_compatibility(source, cells)
    reported = None
    if meta.get("reported"):
        reported = load_reported(Path(source).parent / meta["reported"] if source != "<suite>" else Path(meta["reported"]))
    return Suite(name=normalize_name(meta["name"]), meta=meta, leaderboard=board, cells=cells, quick=quick,
                 path=source, reported=reported, raw=raw, settings=settings, replaced=replaced, search=search)


def _search_points(source: str, search: Search, points: List[Tuple[Dict[str, Any], Dict[str, Any]]]
                   ) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """Each grid point that a search table's ``when`` selects (after the overrides), once per point of
    that table; a point's key is set only where it changes the cell
    (:func:`zoo.bench.suite.search_space.point_settings`)."""
    out: List[Tuple[Dict[str, Any], Dict[str, Any]]] = []
    for point, flat in points:
        try:
            table = search.table_for(lambda when: _matches(flat, when), f"{source} cell {point}")
        except SearchError as e:
            raise SuiteError(str(e)) from None
        if table is None:
            out.append((point, flat))
            continue
        base = resolve_cell(f"{source} cell {point}", flat)
        for values in table.points():
            out.append(({**point, **values}, {**flat, **point_settings(values, base)}))
    return out


# --------------------------------------------------------------------------- --set: a stated-reduced protocol

#: Keys that pick which experiment a cell is, not how it is trained: ``--where`` selects by them.
IDENTITY_KEYS = ("seed", "variant", "model", "dataset")


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
    key = _model_key(reduced["model"])
    if key not in buildable:
        buildable[key] = _build_error(reduced["model"]) is None
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


def _build_error(model: Mapping[str, Any]) -> Optional[str]:
    """Why the cell's model (``config["model"]``) cannot be built on a toy size, or ``None`` if it can."""
    try:
        registries.try_build(model["name"], model["norm"], model["norm_kwargs"], model["kwargs"])
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def _model_key(model: Mapping[str, Any]) -> str:
    return json.dumps([model["name"], model["norm"], model["norm_kwargs"], model["kwargs"]], sort_keys=True, default=str)


def _dry_build(source: str, cells: Sequence[Cell]) -> None:
    """Build every distinct architecture once on a toy size, so bad values fail before any training."""
    seen = set()
    for c in cells:
        m = c.config["model"]
        key = _model_key(m)
        if key in seen:
            continue
        seen.add(key)
        error = _build_error(m)
        if error is not None:
            raise SuiteError(f"{source}: model {m['name']!r} with {m['kwargs']} (norm {m['norm']!r}) "
                             f"cannot be built: {error}")


def check_init_compatibility(source: str, cells: Sequence[Cell]) -> None:
    """Refuse, before any training, a cell whose init does not apply to its architecture (a balanced
    init with a norm that breaks the conservation law): its whole stacked group would fail."""
    seen = set()
    for c in cells:
        m = c.config["model"]
        key = json.dumps([_model_key(m), m["init"], m["init_kwargs"]], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        reason = registries.init_incompatibility(m)
        if reason is not None:
            raise SuiteError(f"{source}: init {m['init']!r} does not apply to model {m['name']!r} with norm "
                             f"{m['norm']!r} and {m['kwargs'] or 'its defaults'} ({reason}); choose another init or "
                             "change what the reason names (in a suite: [[exclude]] those cells, e.g. when = "
                             f"{{init = \"{m['init']}\", norm = \"{m['norm']}\"}})")


def load_reported(path: Path) -> Dict[str, Any]:
    """Paper numbers stored as data: ``{"source", "entries": [{..match keys.., "value", "ci95", "table"}]}``."""
    if not path.is_file():
        raise SuiteError(f"reported numbers file {path} does not exist")
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data.get("entries"), list):
        raise SuiteError(f"{path}: needs an 'entries' list")
    for i, e in enumerate(data["entries"]):
        if "value" not in e or "table" not in e:
            raise SuiteError(f"{path}: entry #{i + 1} needs 'value' and 'table' (e.g. \"Table 2\")")
    return data
