"""Reading a resolved cell config: the value of any suite key, defaults filled in (torch-free)."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

from zoo._names import normalize_name
from zoo.bench.suite.plugins import dataset_options, model_options


def cell_value(config: Dict[str, Any], key: str) -> Any:
    """The value of suite key ``key`` in a resolved cell config (defaults filled in)."""
    model, task = config["model"], config["task"]
    if key == "model":
        return model["name"]
    if key in ("init", "norm", "init_kwargs", "norm_kwargs"):
        return model[key]
    if key in ("dataset", "split", "data_seed", "transforms"):
        return task[key]
    if key in config["run"]:
        return config["run"][key]
    if key in config["train"]:
        return config["train"][key]
    bare = key.split(".", 1)[1] if key.startswith(("arch.", "data.")) else key
    if not key.startswith("data.") and bare in model["kwargs"]:
        return model["kwargs"][bare]
    if not key.startswith("arch.") and bare in task["options"]:
        return task["options"][bare]
    try:  # unset: the model's / dataset's default
        opts = model_options(model["name"])
        if bare in opts and not key.startswith("data."):
            return opts[bare]
        return dataset_options(task["dataset"]).get(bare)
    except (ValueError, KeyError):
        return None


def comparable(v: Any) -> Any:
    """A value as ``--where`` compares it: names normalised, 2.0 == 2, lists and dicts by their repr."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return normalize_name(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, (list, dict)):
        return repr(v)
    return v


def matches(config: Dict[str, Any], where: Mapping[str, Sequence[Any]]) -> bool:
    """Whether a resolved cell matches every ``--where`` clause (values of one key are alternatives)."""
    for key, values in where.items():
        try:
            have = repr(comparable(cell_value(config, key)))
        except (KeyError, ValueError):
            return False
        if have not in {repr(comparable(v)) for v in values}:
            return False
    return True
