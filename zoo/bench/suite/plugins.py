"""The plugin registries as the spec sees them: names, canonical spellings and default options.

The suite layer is importable without torch, but the registries it validates against (models,
inits, norms, datasets, readouts, transforms) live in packages that import torch.  They are named
here as data (:data:`REGISTRIES`) and loaded with ``importlib`` on the first lookup — the spec's one
runtime link to the torch side, in one place, like ``zoo/__init__``'s lazy names (PEP 562).
Reading a suite therefore loads torch only when it checks a model or dataset name.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import json
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from zoo._names import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from zoo.datasets import DatasetSpec

#: plugin kind -> (module holding its registry, registry name); each registry imports its plugins itself
REGISTRIES: Dict[str, Tuple[str, str]] = {
    "model": ("zoo.registry", "MODELS"), "init": ("zoo.inits", "INITS"), "norm": ("zoo.norms", "NORMS"),
    "dataset": ("zoo.datasets", "DATASETS"), "readout": ("zoo.nn.readout", "READOUTS"),
    "transform": ("zoo.datasets.transforms", "TRANSFORMS"),
}
PLUGIN_KINDS = ("model", "init", "norm", "dataset", "readout")


#: A user's graphs (``zoo.fit(model, data)``), seen as datasets only while that fit resolves and trains
#: its cells: a context, not a registration, so a notebook's data never outlives the call that uses it.
_USER_DATASETS: "contextvars.ContextVar[Mapping[str, DatasetSpec]]" = contextvars.ContextVar("user_datasets",
                                                                                              default={})


@contextlib.contextmanager
def user_datasets(specs: Mapping[str, "DatasetSpec"]) -> Iterator[None]:
    """Within the block, dataset names in ``specs`` resolve to those cards (before the registry)."""
    token = _USER_DATASETS.set({**_USER_DATASETS.get(), **{normalize_name(k): v for k, v in specs.items()}})
    try:
        yield
    finally:
        _USER_DATASETS.reset(token)


def _module(name: str) -> Any:
    # sys.modules first: a suite's resolution asks ~10 times per cell, and import_module's own
    # bookkeeping was a tenth of a large suite's load time.
    module = sys.modules.get(name)
    return module if module is not None else importlib.import_module(name)


def registry(kind: str) -> Any:
    """The registry of plugin ``kind`` (a key of :data:`REGISTRIES`), loaded on first use."""
    if kind not in REGISTRIES:
        raise ValueError(f"unknown plugin kind {kind!r}; one of {', '.join(REGISTRIES)}")
    module, attr = REGISTRIES[kind]
    return getattr(_module(module), attr)


def model_options(model: str) -> Dict[str, Any]:
    """Constructor options (with defaults) of ``model`` (``gat`` or a preset ``gat.tag``)."""
    return _module("zoo.registry").constructor_options(registry("model").get(model.split(".")[0]))


def model_takers(option: str) -> List[str]:
    """The registered models that take ``option`` (a suite names them when another model is given it)."""
    return registry("model").takers(option)


def dataset_spec(dataset: str) -> "DatasetSpec":
    """The dataset registry's card for ``dataset`` (sizes, options, kind); a user's graph in
    :func:`user_datasets` first."""
    user = _USER_DATASETS.get().get(normalize_name(dataset))
    return user if user is not None else _module("zoo.datasets").get_spec(dataset)


#: Fingerprints of registered datasets' data, per (card, task keys), while one suite is resolved
_FINGERPRINTS: "contextvars.ContextVar[Optional[Dict[Any, Any]]]" = contextvars.ContextVar("fingerprints",
                                                                                            default=None)


@contextlib.contextmanager
def fingerprint_scope() -> Iterator[None]:
    """Within the block, a registered dataset's data is loaded and hashed once per recipe (a suite's
    resolution asks for every cell); outside, every call loads it again."""
    token = _FINGERPRINTS.set({} if _FINGERPRINTS.get() is None else _FINGERPRINTS.get())
    try:
        yield
    finally:
        _FINGERPRINTS.reset(token)


def data_fingerprint(dataset: str, task: Mapping[str, Any]) -> Optional[str]:
    """The fingerprint a cell on ``dataset`` with task keys ``task`` records: a user's graph's, or the
    data a *registered* dataset's loader makes now (loaded and hashed); ``None`` for the zoo's own
    datasets, whose recipe (name, split, seed, transforms, options) identifies their data."""
    spec = dataset_spec(dataset)
    if spec.fingerprint is not None:
        return spec.fingerprint
    fingerprints = _module("zoo.datasets.fingerprint")
    if fingerprints.is_builtin(spec):
        return None
    memo = _FINGERPRINTS.get()
    key = (id(spec), json.dumps(task, sort_keys=True, default=str))
    if memo is not None and key in memo:
        return memo[key][1]
    value = _module("zoo.datasets.registry").recipe_fingerprint(spec.name, dict(task))
    if memo is not None:
        memo[key] = (spec, value)  # the card held: its id is not reused while the memo lives
    return value


def dataset_options(dataset: str) -> Dict[str, Any]:
    """Loader options (with defaults) of ``dataset``."""
    return dict(dataset_spec(dataset).options)


def check_dataset_options(dataset: str, options: Dict[str, Any]) -> None:
    """The dataset loader's own option check (names and types: a switch takes true/false only)."""
    _module("zoo.datasets.registry").check_options(dataset_spec(dataset), options)


def canonical_name(kind: str, name: str) -> str:
    """The registered spelling of plugin ``name`` of ``kind`` (one of :data:`PLUGIN_KINDS`);
    an unknown name raises ``ValueError`` listing the close matches."""
    if kind == "dataset" and normalize_name(name) in _USER_DATASETS.get():
        return normalize_name(name)
    if kind == "model":
        base, _, tag = name.partition(".")
        return registry("model").canonical(base) + (f".{normalize_name(tag)}" if tag else "")
    return registry(kind).canonical(name)


def transform_takes_seed(name: str) -> bool:
    """Whether dataset transform ``name`` draws from a seed (the task's, unless given)."""
    return "seed" in inspect.signature(registry("transform").get(name).__init__).parameters


def is_builtin(spec: "DatasetSpec") -> bool:
    """A dataset of the zoo's own (identified by its recipe), not one a user registered."""
    return _module("zoo.datasets.fingerprint").is_builtin(spec)


def canonical_transform(name: str) -> str:
    """The registered spelling of dataset transform ``name``."""
    return registry("transform").canonical(name)


def try_build(name: str, norm: str, norm_kwargs: Any, kwargs: Dict[str, Any]) -> None:
    """Build model ``name`` once on a toy size (8 -> 4); bad options raise ``TypeError``/``ValueError``."""
    build = _module("zoo.build").build
    build(name, in_dim=8, out_dim=4, init="xavier", norm=norm, norm_kwargs=norm_kwargs or None, **kwargs)


def init_incompatibility(model: Dict[str, Any]) -> "str | None":
    """Why the init of a resolved cell's ``model`` table does not apply to its architecture (built
    once on a toy size), or ``None``; only inits that declare a check
    (:func:`zoo.inits.register_init`'s ``check``) build anything."""
    inits = _module("zoo.inits")
    if not inits.has_check(model["init"]):
        return None
    build = _module("zoo.build").build
    net = build(model["name"], in_dim=8, out_dim=4, init="xavier", norm=model["norm"],
                norm_kwargs=model["norm_kwargs"] or None, **model["kwargs"])
    return inits.init_incompatibility(net, model["init"], **(model.get("init_kwargs") or {}))
