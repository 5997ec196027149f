"""Reading a resolved cell config: the value of any suite key, defaults filled in (torch-free)."""
from __future__ import annotations

from typing import Any, Dict

from zoo.bench.spec.plugins import dataset_options, model_options


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
