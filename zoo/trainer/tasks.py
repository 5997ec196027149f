"""What ``zoo.fit`` / ``zoo.diagnose`` train on, as suite keys: a dataset name, a task from
:func:`zoo.datasets.load`, or a user's graph (a PyG ``Data``, a ``dgl.DGLGraph``, or
``zoo.datasets.Task.from_data(...)``).

A cell's id hashes its resolved configuration, so everything that made a task enters it: a loaded
task by its recipe (dataset, split, data seed, transforms, options — the keys a suite would write),
and, once its data was edited after loading (a mask replaced, features changed in place), by its
recipe *and* its content's :meth:`~zoo.datasets.Task.fingerprint`; a user's graph by that
fingerprint.  A task whose making cannot be written down (a callable transform) is refused rather
than given another task's id.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from zoo.datasets import DATASETS, DatasetSpec, Task
from zoo._dgl import is_dgl_graph

#: suite keys that choose a dataset's split and preprocessing
DATA_KEYS = ("split", "data_seed", "transforms")


@dataclass
class TaskInput:
    """The suite keys of the task, the loaded task (``None``: a name, loaded by the runner) and, for a
    user's graph, its dataset card for :func:`zoo.bench.suite.plugins.user_datasets`."""

    keys: Dict[str, Any]
    task: Optional[Task] = None
    user_spec: Optional[DatasetSpec] = None

    @property
    def user_specs(self) -> Dict[str, DatasetSpec]:
        return {self.user_spec.name: self.user_spec} if self.user_spec is not None else {}


def _data_keys_given(options: Mapping[str, Any], dataset_options: Mapping[str, Any]) -> list:
    return [k for k, v in options.items() if v is not None and
            (k in DATA_KEYS or k.startswith("data.") or k in dataset_options)]


def _from_loaded(task: Task, options: Mapping[str, Any]) -> TaskInput:
    made = task.provenance or {}
    if made.get("undescribed"):
        raise ValueError(f"cannot record how task {task.name!r} was made ({made['undescribed']}), so its cell id "
                         "would name another task: use a registered transform by name, or wrap the data with "
                         "zoo.datasets.Task.from_data(task.data, name=...) so its content is fingerprinted")
    given = _data_keys_given(options, DATASETS.get(made["dataset"]).options)
    if given:
        raise ValueError(f"the task from zoo.datasets.load already fixes its data; {', '.join(given)} would not "
                         f"change it: pass them to zoo.datasets.load({made['dataset']!r}, ...) or give the dataset "
                         "name instead of the task")
    keys: Dict[str, Any] = {"dataset": made["dataset"], "data_seed": made["data_seed"]}
    if made["split"] is not None:
        keys["split"] = made["split"]
    if made["transforms"]:
        keys["transforms"] = [list(t) if isinstance(t, (list, tuple)) else t for t in made["transforms"]]
    keys.update({f"data.{k}": v for k, v in made["options"].items()})
    if task.as_made():
        return TaskInput(keys, task)
    # edited after loading: the recipe says where the data came from, the fingerprint what it is now
    from zoo.datasets.checks import check_features, check_task

    check_task(task)
    check_features(task)
    spec = dataclasses.replace(DATASETS.get(made["dataset"]), fingerprint=task.fingerprint())
    return TaskInput(keys, task, spec)


def _from_user(task: Task) -> TaskInput:
    if task.name in DATASETS:
        raise ValueError(f"task {task.name!r} holds data that zoo.datasets.load({task.name!r}) did not make, and "
                         "would be recorded under that dataset's name: give it another name "
                         "(zoo.datasets.Task.from_data(data, name='my_graph'))")
    spec = DatasetSpec(name=task.name, kind=task.kind, metric=task.metric, source=task.source or "user data",
                       loader=lambda **_: task, options={}, fingerprint=task.fingerprint())
    return TaskInput({"dataset": task.name}, task, spec)


def as_task(task: Any, options: Dict[str, Any]) -> Any:
    """A raw graph (a PyG ``Data`` or a ``dgl.DGLGraph``) as a :class:`Task`, its ``split`` (ratios)
    and ``data_seed`` taken out of ``options`` (they make its masks); any other ``task`` as given."""
    if is_dgl_graph(task) or type(task).__name__ == "Data":
        split, seed = options.pop("split", None), options.pop("data_seed", None)
        return Task.from_data(task, split=split, seed=0 if seed is None else seed)
    return task


def task_input(task: Any, options: Dict[str, Any]) -> TaskInput:
    """The :class:`TaskInput` for ``task``; a raw graph's ``split`` (ratios) and ``data_seed`` are
    taken out of ``options`` (they make its masks)."""
    if isinstance(task, str):
        return TaskInput({"dataset": task})
    task = as_task(task, options)
    if not isinstance(task, Task):
        raise TypeError(f"task must be a dataset name (e.g. 'cora'), a task from zoo.datasets.load, a "
                        f"torch_geometric Data, a dgl.DGLGraph or zoo.datasets.Task.from_data(...); got "
                        f"{type(task).__name__}")
    if task.provenance is not None:
        return _from_loaded(task, options)
    given = _data_keys_given(options, {})
    if given:
        raise ValueError(f"{', '.join(given)} do(es) not apply to a task built from your data: make the split "
                         "when building it (zoo.datasets.Task.from_data(data, split=(0.6, 0.2), seed=...))")
    return _from_user(task)
