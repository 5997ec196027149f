"""One cell's flat keys -> its canonical configuration (what the run records store and its id hashes).

Every value is checked against the schema (:mod:`zoo.bench.suite.schema`) and the registries
(:mod:`zoo.bench.suite.plugins`): names are canonicalised, defaults filled in, and a bad key,
type, split or option fails here, before any training.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple

from zoo._names import normalize_name, unknown_name_error
from zoo.bench.suite import plugins as registries
from zoo.bench.suite.schema import (DEFAULT_OMITTED_TRAIN_KEYS, DTYPES, ENERGY_FORWARD, FIXED_BY_TASK, KEY_TYPES,
                                    OPTIONAL_RUN_KEYS, OPTIONAL_TRAIN_KEYS, PLUGIN_KEYS, RESCALE_CRITERIA, RUN_KEYS,
                                    TASK_KEYS, TRAIN_KEYS, SuiteError, check_keys)
from zoo.trainer.config import OPTIMIZERS, SELECT, TrainConfig


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
    numeric = isinstance(TRAIN_KEYS[key], float) or key == "grad_clip_norm"  # its default is None (off)
    if numeric and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass
class _Parts:
    """A cell's configuration while its flat keys are placed (defaults first)."""

    dataset: str
    model: str
    model_opts: Mapping[str, Any]
    data_opts: Mapping[str, Any]
    task: Dict[str, Any] = field(default_factory=dict)
    arch: Dict[str, Any] = field(default_factory=dict)
    train: Dict[str, Any] = field(default_factory=dict)
    run: Dict[str, Any] = field(default_factory=dict)
    plugins: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.task = {"dataset": self.dataset, "split": None, "transforms": [], "data_seed": 0, "options": {}}
        self.train = {k: v for k, v in TRAIN_KEYS.items() if k not in OPTIONAL_TRAIN_KEYS}
        self.train["betas"] = list(self.train["betas"])
        self.run = {k: v for k, v in RUN_KEYS.items() if k not in OPTIONAL_RUN_KEYS}
        self.plugins = {"init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}}

    def valid_keys(self) -> List[str]:
        fixed = {**TRAIN_KEYS, **TASK_KEYS, **PLUGIN_KEYS, **RUN_KEYS}
        return sorted(set(fixed) | {k for k in self.model_opts if k not in FIXED_BY_TASK} | set(self.data_opts)
                      | {f"arch.{k}" for k in self.model_opts} | {f"data.{k}" for k in self.data_opts})


def _check_present_and_typed(where: str, flat: Mapping[str, Any]) -> None:
    if not flat.get("dataset"):
        raise SuiteError(f"{where}: every cell needs a 'dataset' (set it in [defaults] or [grid])")
    if not flat.get("model"):
        raise SuiteError(f"{where}: every cell needs a 'model' (set it in [defaults] or [grid])")
    for k, types in KEY_TYPES.items():
        v = flat.get(k)
        if v is not None and not (isinstance(v, types) and not (isinstance(v, bool) and bool not in types)):
            raise SuiteError(f"{where}: {k!r} must be {' or '.join(t.__name__ for t in types)}, got {v!r}")


def _start(where: str, flat: Mapping[str, Any]) -> _Parts:
    try:
        dataset = registries.canonical_name("dataset", flat["dataset"])
        model = registries.canonical_name("model", flat["model"])
        return _Parts(dataset, model, registries.model_options(model), registries.dataset_options(dataset))
    except ValueError as e:
        raise SuiteError(f"{where}: {e}") from None


def _place_namespaced(where: str, parts: _Parts, key: str, value: Any) -> None:
    """``arch.KEY`` / ``data.KEY``: an option of the model / of the dataset, said explicitly."""
    opt = key[5:]
    if key.startswith("arch."):
        if opt not in parts.model_opts:
            takers = registries.model_takers(opt)
            raise SuiteError(f"{where}: model {parts.model!r} has no option {opt!r}"
                             + (f" (an option of {', '.join(takers)})" if takers else "")
                             + f". Its options: {', '.join(sorted(parts.model_opts))}.")
        parts.arch[opt] = value
    else:
        if opt not in parts.data_opts:
            raise SuiteError(f"{where}: dataset {parts.dataset!r} has no option {opt!r}. "
                             f"Its options: {', '.join(sorted(parts.data_opts)) or '(none)'}.")
        parts.task["options"][opt] = value


def _place(where: str, parts: _Parts, key: str, value: Any) -> None:
    """Put one flat key where the canonical configuration holds it, checking its value."""
    if key in FIXED_BY_TASK or key in (f"arch.{k}" for k in FIXED_BY_TASK):
        raise SuiteError(f"{where}: {key!r} is set from the dataset (features / classes); remove it")
    if key.startswith(("arch.", "data.")):
        _place_namespaced(where, parts, key, value)
    elif key in ("dataset", "model"):
        return
    elif key in TASK_KEYS:
        parts.task[key] = _normalise_transforms(f"{where}: transforms", value) if key == "transforms" else value
    elif key in PLUGIN_KEYS:
        if key in ("init", "norm", "readout"):
            try:
                value = registries.canonical_name(key, value)
            except ValueError as e:
                raise SuiteError(f"{where}: {e}") from None
        parts.plugins[key] = value
    elif key in TRAIN_KEYS:
        parts.train[key] = list(value) if key == "betas" else _as_declared(key, value)
    elif key in RUN_KEYS:
        if key == "rescale" and value not in RESCALE_CRITERIA:
            raise SuiteError(f"{where}: rescale must be one of {', '.join(RESCALE_CRITERIA)}, got {value!r}")
        if key == "energy_forward" and value not in ENERGY_FORWARD:
            raise SuiteError(f"{where}: energy_forward must be one of {', '.join(ENERGY_FORWARD)}, got {value!r}")
        parts.run[key] = value
    elif key in parts.model_opts and key in parts.data_opts:
        raise SuiteError(f"{where}: {key!r} is an option of model {parts.model!r} and of dataset {parts.dataset!r}; "
                         f"write arch.{key} or data.{key}")
    elif key in parts.model_opts:
        if key in ("norm", "norm_kwargs"):
            parts.plugins[key] = value
        else:
            parts.arch[key] = value
    elif key in parts.data_opts:
        parts.task["options"][key] = value
    elif registries.model_takers(key):  # an option of other families: say so, not "unknown key"
        raise SuiteError(f"{where}: model {parts.model!r} has no option {key!r} (an option of "
                         f"{', '.join(registries.model_takers(key))}); drop it from this model's cells")
    else:
        check_keys(where, {key: value}, parts.valid_keys())


def _check_run_and_train(where: str, run: Dict[str, Any], train: Dict[str, Any]) -> None:
    """The run and trainer values the schema's types cannot check alone (normalises the optimizer's name)."""
    if run["dtype"] not in DTYPES:
        raise SuiteError(f"{where}: dtype must be one of {DTYPES}, got {run['dtype']!r}")
    if train["select"] not in SELECT:
        raise SuiteError(f"{where}: select must be one of {SELECT}, got {train['select']!r}")
    if train["patience_on"] not in ("select", "either"):
        raise SuiteError(f"{where}: patience_on must be 'select' or 'either', got {train['patience_on']!r}")
    if normalize_name(train["optimizer"]) not in OPTIMIZERS:
        raise SuiteError(f"{where}: {unknown_name_error('optimizer', train['optimizer'], OPTIMIZERS)}")
    train["optimizer"] = normalize_name(train["optimizer"])
    for key in ("lr_scheduler", "precision"):  # names, spelled as the optimizer's: "BF16" is "bf16"
        if isinstance(train.get(key), str):
            train[key] = normalize_name(train[key])
    try:
        TrainConfig(**{**train, "betas": tuple(train["betas"])})
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{where}: {e}") from None


def _omit_defaults(where: str, run: Dict[str, Any], train: Dict[str, Any]) -> None:
    """Drop the trainer keys that stay out of a config at their default; bf16 needs a float32 model."""
    for key in DEFAULT_OMITTED_TRAIN_KEYS:
        if key in train and train[key] == TRAIN_KEYS[key]:
            del train[key]
    if train.get("precision") == "bf16" and run["dtype"] != "float32":
        raise SuiteError(f"{where}: precision = \"bf16\" autocasts a float32 model; dtype is {run['dtype']!r}: "
                         "set dtype = \"float32\" or drop precision")


def _add_fingerprint(where: str, dataset: str, task: Dict[str, Any]) -> None:
    """A user's graph, an edited task and a registered dataset: their data's content, not the name,
    says which data the cell runs on (the zoo's own datasets are identified by their recipe)."""
    try:
        fingerprint = registries.data_fingerprint(dataset, task)
    except SuiteError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's loader, run to see its data
        raise SuiteError(f"{where}: dataset {dataset!r} could not be loaded to fingerprint its data: "
                         f"{type(e).__name__}: {e}") from None
    if fingerprint is not None:
        task["fingerprint"] = fingerprint


def resolve_cell(where: str, flat: Dict[str, Any]) -> Dict[str, Any]:
    """Validate one cell's flat keys and return its canonical configuration.

    Returns ``{"task": ..., "model": ..., "train": ..., "run": ...}`` with every value resolved
    (defaults filled in), which is what the run records store.
    """
    _check_present_and_typed(where, flat)
    parts = _start(where, flat)
    for key, value in flat.items():
        _place(where, parts, key, value)
    task, run, train = parts.task, parts.run, parts.train
    _omit_defaults(where, run, train)
    task["data_seed"] = _data_seed(where, task["data_seed"], run["seed"])
    _check_split(where, parts.dataset, task["split"])
    task["split"] = canonical_split(parts.dataset, task["split"])  # one split of the data, one cell id
    try:  # a switch takes true/false only: "False" or "no" would switch a transform on
        registries.check_dataset_options(parts.dataset, task["options"])
    except (TypeError, ValueError) as e:
        raise SuiteError(f"{where}: {e}") from None
    if not _draws_from_seed(parts.dataset, task):  # the same data, one cell id (the seed would change nothing)
        task["data_seed"] = 0
    _add_fingerprint(where, parts.dataset, task)
    _check_run_and_train(where, run, train)
    return {"task": task, "model": {"name": parts.model, **parts.plugins, "kwargs": parts.arch}, "train": train,
            "run": run}

#: Named splits by dataset family (the loaders' own names; ``zoo/datasets``).  Checked at suite load
#: so that a bad ``split`` fails before any training, not when its group starts.
_RANDOM_SPLITS = ("per_class", "random_per_class", "random", "ratio", "random_ratio")


def _num_splits(spec: Any) -> int:
    num = spec.stats.get("num_splits", 0)
    return num if isinstance(num, int) else 0


def valid_splits(dataset: str) -> Tuple[Tuple[str, ...], int]:
    """``(split names, number of integer splits)`` that ``dataset``'s loader accepts: ``public`` only
    where the data has one (Planetoid's; a user's registered loader may), stored splits by number."""
    spec = registries.dataset_spec(dataset)
    if spec.synthetic or "synthetic" in spec.source:
        return ("random",), 0
    if spec.kind == "transductive" and not spec.name.startswith("ogb"):
        num = _num_splits(spec)
        public = ("public",) if "public_split" in spec.stats or not registries.is_builtin(spec) else ()
        return (*public, *(("geom_gcn",) if num else ()), *_RANDOM_SPLITS), num
    if spec.name == "ogbg_molhiv":
        return ("official", "scaffold"), 0
    return ("official",), 0


#: other spellings of a named split in the loaders (:func:`zoo.datasets.registry.select_split`)
_SPLIT_SYNONYMS = {"random_per_class": "per_class", "random": "per_class", "random_ratio": "ratio", "geom_gcn": 0}


def _default_split(spec: Any) -> Any:
    """The split a zoo dataset's loader runs when none is given (its ``select_split`` default)."""
    if spec.synthetic or "synthetic" in spec.source:
        return "random"
    if spec.kind == "transductive" and not spec.name.startswith("ogb"):
        if "public_split" in spec.stats:
            return "public"
        return 0 if _num_splits(spec) else "per_class"
    return "scaffold" if spec.name == "ogbg_molhiv" else "official"


def canonical_split(dataset: str, split: Any) -> Any:
    """The one form of ``split`` a cell's config holds (its id hashes it), so one split of the data is
    one cell: "no split given" is the dataset's default split.

    A dataset with several stored splits and no own split (Geom-GCN's ten, Platonov et al.'s ten) runs
    split 0 by default: its config says which one ran, ``0`` (``None`` and ``"geom_gcn"`` are that split).
    A dataset's own named split (Planetoid's public one, OGB's official one, a generator's seeded one,
    the per-class draw of the Shchur et al. sets) is ``None``, as every record of those datasets holds it
    (the record's ``split`` names it). Other names get their canonical spelling. A user's dataset keeps
    the value given: its loader alone knows what its names mean.
    """
    spec = registries.dataset_spec(dataset)
    if isinstance(split, bool) or not registries.is_builtin(spec):
        return split
    default = _default_split(spec)
    value = default if split is None else split
    if isinstance(value, str):
        value = normalize_name(value)
        if default != "random":  # a generator's only split is called "random"
            value = _SPLIT_SYNONYMS.get(value, value)
        if default == "scaffold" and value == "official":
            value = "scaffold"
    if type(value) is type(default) and value == default:
        return default if isinstance(default, int) else None
    return value


def _draws_from_seed(dataset: str, task: Mapping[str, Any]) -> bool:
    """Whether a cell's ``data_seed`` can change its data: a random split, a generated dataset, a
    seeded transform, a graph set's batch order, or a user's loader (which gets the seed)."""
    spec = registries.dataset_spec(dataset)
    if spec.synthetic or spec.kind != "transductive" or not registries.is_builtin(spec):
        return True
    for t in task["transforms"]:
        name, options = (t, {}) if isinstance(t, str) else (t[0], t[1])
        if "seed" not in options and registries.transform_takes_seed(name):
            return True
    split = task["split"]
    if split is None:  # the dataset's own split: Planetoid's public one, a stored split 0, OGB's official one
        return not ("public_split" in spec.stats or _num_splits(spec) or spec.name.startswith("ogb"))
    return not isinstance(split, int) and normalize_name(split) not in ("public", "geom_gcn", "official", "scaffold")


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
