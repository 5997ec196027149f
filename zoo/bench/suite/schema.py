"""The suite schema: the keys a suite file and a cell may hold, and what a parsed suite is.

Cell keys are flat: trainer keys (``optimizer``, ``lr``, ``epochs``...), run keys (``seed``,
``dtype``...), task keys (``dataset``, ``split``, ``transforms``, ``data_seed``), the plugin keys
of ``zoo.build`` (``model``, ``init``, ``init_kwargs``, ``norm``, ``norm_kwargs``) and every
constructor option of the chosen model and every option of the chosen dataset.  A key that
is both a model and a dataset option must be written ``arch.KEY`` or ``data.KEY``.  Unknown
keys and names are errors that list the valid choices.

A cell's ``id`` is a hash of its fully resolved configuration (:func:`cell_id`); cells that
differ only in ``seed``/``init``/``init_kwargs`` share a ``group`` and are trained as stacked
replicas.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo._names import close_matches, normalize_name
from zoo.bench.suite.search_space import Search
from zoo.trainer.config import TrainConfig


class SuiteError(ValueError):
    """A suite file is invalid; the message names the file, the place and the fix."""


TOP_LEVEL = ("suite", "defaults", "grid", "variants", "override", "exclude", "search", "quick", "leaderboard")

META_KEYS = ("name", "title", "paper", "tables", "description", "reported", "mode", "notes", "plugins")

QUICK_KEYS = ("defaults", "grid", "override", "exclude")

LEADERBOARD_KEYS = ("rows", "columns", "metric", "table_by", "scale")

# data_seed is a task key; keep_best_state is switched on by prune_layers; check_every is how often the
# host reads the stop flags and cuda_graphs whether the epoch is replayed as CUDA graphs: neither changes a
# number (so they are no cell keys: the cell ids stay as they were).
TRAIN_KEYS = {f.name: (f.default_factory() if f.default is MISSING else f.default)  # type: ignore[misc]
              for f in fields(TrainConfig)
              if f.name not in ("data_seed", "keep_best_state", "check_every", "cuda_graphs")}

# Trainer keys that enter a cell's config only where set (added later: the other cells' ids stay as they were).
OPTIONAL_TRAIN_KEYS = ("lr_scheduler", "lr_scheduler_kwargs", "select_ties", "grad_clip_norm", "precision",
                       "flush_subnormals")
# Of those, the ones left out at their default even where set: one protocol, one cell id.
DEFAULT_OMITTED_TRAIN_KEYS = ("grad_clip_norm", "precision", "flush_subnormals")

TASK_KEYS = {"dataset": None, "split": None, "transforms": [], "data_seed": 0}

# readout (graph tasks; zoo.nn.readout) enters a cell's config only where set: other suites' cell ids stay as they were.
PLUGIN_KEYS = {"model": None, "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {}, "readout": None}

RUN_KEYS = {"seed": 0, "dtype": "float32", "variant": None, "prune_layers": [], "rescale": None,
            "energy_forward": "eval"}

# Run keys that enter a cell's config only where set (added later: the other cells' ids stay as they were).
OPTIONAL_RUN_KEYS = ("rescale", "energy_forward")

#: ``rescale``: a dynamic-rescaling criterion (zoo.rescale.CRITERIA; the callback runs with its defaults).
RESCALE_CRITERIA = ("relative_gradients", "weight_norms")

#: ``energy_forward`` (mode ``energy_at_init``): the module mode of the measured forward pass —
#: ``eval`` (dropout off, the default) or ``train`` (dropout on, as a freshly built module is).
ENERGY_FORWARD = ("eval", "train")

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
    "lr_scheduler_kwargs": (dict,), "rescale": (str,), "energy_forward": (str,), "grad_clip_norm": (int, float), "precision": (str,),
    "flush_subnormals": (bool,),
}


#: ``(grid point, flat cell keys)`` pairs, as the expansion makes them (:mod:`zoo.bench.suite.expand`)
Points = List[Tuple[Dict[str, Any], Dict[str, Any]]]


@dataclass
class Cell:
    """One fully resolved configuration (one run)."""

    id: str
    group: str
    config: Dict[str, Any]

    @property
    def seed(self) -> int:
        return int(self.config["run"]["seed"])

    @property
    def init(self) -> str:
        """The init plugin's canonical name (``balanced_orthogonal`` for ``bal_o``)."""
        return self.config["model"]["init"]

    @property
    def dataset(self) -> str:
        return self.config["task"]["dataset"]

    @property
    def epochs(self) -> int:
        """The epoch cap of the training protocol."""
        return int(self.config["train"]["epochs"])


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


def cell_id(config: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def group_id(config: Mapping[str, Any]) -> str:
    c = dict(config)  # a shallow copy: only "run" and "model" are replaced, by new dicts (no deepcopy per cell)
    c["run"] = {k: v for k, v in c["run"].items() if k not in GROUP_FREE}
    c["model"] = {k: v for k, v in c["model"].items() if k not in GROUP_FREE}
    return cell_id(c)


def with_value(cell: Cell, section: str, key: str, value: Any) -> Cell:
    """``cell`` with ``config[section][key] = value``, under that configuration's id and group (e.g. the
    fingerprint of the weights ``zoo.fit`` starts from, which no suite key can name)."""
    config = {**cell.config, section: {**cell.config[section], key: value}}
    return Cell(cell_id(config), group_id(config), config)


#: other libraries' names for the zoo's keys (PyTorch Lightning, PyG examples...): what a typo matcher
#: cannot guess (``learning_rate`` is closer to ``train_ratio`` than to ``lr`` by spelling)
KEY_SYNONYMS = {"learning_rate": "lr", "num_epochs": "epochs", "max_epochs": "epochs", "n_epochs": "epochs",
                "layers": "num_layers", "n_layers": "num_layers", "depth": "num_layers", "hidden": "hidden_dim",
                "hidden_channels": "hidden_dim", "hidden_size": "hidden_dim", "wd": "weight_decay",
                "optim": "optimizer", "dataset_name": "dataset", "initialization": "init", "init_method": "init",
                "normalization": "norm"}


def check_keys(where: str, got: Mapping[str, Any], valid: Sequence[str]) -> None:
    unknown = [k for k in got if k not in valid]
    if unknown:
        parts = []
        for k in unknown:
            synonym = KEY_SYNONYMS.get(normalize_name(k)) if isinstance(k, str) else None
            near = [synonym] if synonym in valid else close_matches(k, valid)
            parts.append(repr(k) + (f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""))
        raise SuiteError(f"{where}: unknown key(s) {', '.join(parts)}. Valid keys: {', '.join(sorted(valid))}.")


def flatten(where: str, table: Mapping[str, Any]) -> Dict[str, Any]:
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
