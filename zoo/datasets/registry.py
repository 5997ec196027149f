"""Dataset registry, ``load`` and ``list_datasets``.

Each dataset family lives in its own module and registers its names with
:func:`register_dataset`; a loader receives the resolved data root, the requested split,
the seed and its options, and returns a :class:`~zoo.datasets.task.Task` before user
transforms. ``load`` validates names and options, then applies the user's transforms.
"""
from __future__ import annotations

import functools
import operator
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from torch_geometric.data import Data

from .._names import Registry, check_options as check_option_names, definition, normalize_name, unknown_name_error
from . import cache, mirror
from .splits import RATIO_ROUNDINGS, column, per_class_split, ratio_split
from .fingerprint import Seal
from .task import Task
from .transforms import (TRANSFORMS, GraphTransform, TransformSpec, apply_transforms, apply_transforms_to_graphs,
                         make_transform)

Loader = Callable[..., Task]

#: Options of every transductive dataset that choose a random split.
SPLIT_OPTIONS: Dict[str, Any] = {
    "train_per_class": 20, "val_per_class": 30, "num_val": None, "num_test": None,
    "train_ratio": 0.6, "val_ratio": 0.2, "ratio_rounding": "round",
}


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    kind: str
    metric: str
    source: str                          # the PyG/OGB class (or generator) that builds it
    loader: Loader
    options: Mapping[str, Any]           # valid options -> defaults
    raw_files: Tuple[str, ...] = ()      # paths relative to the data root; "dir/" = a whole folder
    stats: Mapping[str, Any] = field(default_factory=dict)  # nodes, edges, features, classes, splits
    synthetic: bool = False
    note: str = ""
    fingerprint: Optional[str] = None    # a user's graph (zoo.fit(model, data)): its content hash


def _check_values(owner: str, options: Mapping[str, Any], accepted: Mapping[str, Any]) -> None:
    """A dataset's own value rules: a few options take one of some names; ``download`` (default
    ``None``: decide for me) is a switch all the same."""
    for key, value in options.items():
        if key in _CHOICE_OPTIONS and value not in _CHOICE_OPTIONS[key]:
            raise ValueError(f"{owner}: option {key} must be one of "
                             f"{', '.join(map(repr, _CHOICE_OPTIONS[key]))}, got {value!r}")
        if key in _NULLABLE_SWITCHES and value is not None and not isinstance(value, bool):
            raise TypeError(f"{owner}: option {key} must be true or false, got {value!r} ({type(value).__name__}); "
                            "write true or false (unquoted in TOML and --set)")


#: a dataset declares its options as data (``register_dataset(options=...)``) and is made by its loader
DATASETS: "Registry[DatasetSpec]" = Registry(
    "dataset", populate=("zoo.datasets",), identity=lambda spec: definition(spec.loader),
    options=lambda spec: spec.options, factory=lambda spec: spec.loader, check=_check_values)


def register_dataset(name: str, *, kind: str, metric: str, source: str, options: Mapping[str, Any] = (),
                     raw_files: Sequence[str] = (), stats: Optional[Mapping[str, Any]] = None,
                     synthetic: bool = False, aliases: Sequence[str] = (), note: str = ""
                     ) -> Callable[[Loader], Loader]:
    """Register ``loader(root, split, seed, **options) -> Task`` under ``name``."""
    def deco(loader: Loader) -> Loader:
        spec = DatasetSpec(normalize_name(name), kind, metric, source, loader, dict(options),
                           tuple(raw_files), dict(stats or {}), synthetic, note)
        with warnings.catch_warnings(record=True) as replaced:  # a notebook cell run again
            warnings.simplefilter("always")
            DATASETS.add(name, spec, aliases=aliases)
        for w in replaced:  # one line: the registry's, and whether the data the name loads changed
            warnings.warn(f"{w.message}{data_change(spec.name)}", w.category, stacklevel=2)
        return loader
    return deco


def get_spec(name: str) -> DatasetSpec:
    return DATASETS.get(name)


# --------------------------------------------------------------------------- options

#: Options whose default is None but which are switches all the same (None = "decide for me").
_NULLABLE_SWITCHES = ("download",)
#: Options that take one of a few names (checked at suite load, not only when the split is drawn).
_CHOICE_OPTIONS: Dict[str, Tuple[str, ...]] = {"ratio_rounding": RATIO_ROUNDINGS}


def check_options(spec: DatasetSpec, options: Mapping[str, Any]) -> None:
    """Unknown names and wrong types fail with one line naming the option (the registry's one check,
    :meth:`zoo._names.Registry.check`, also for a user's graph, whose card is not registered).

    An option takes the type of its default: a switch (default ``False``) takes only ``True`` /
    ``False`` (TOML/CLI ``true``/``false``) — ``"false"``, ``"no"``, ``0`` or ``1.5`` would
    otherwise be truthy and switch a transform *on* while the record shows the string; an int
    option takes an int, a float option a number (bools are neither).
    """
    check_option_names(f"dataset {spec.name!r}", options, spec.options, rules=_check_values)


def _seed_of(seed: Any) -> int:
    """An integer seed (numpy integers too); ``"a"``, ``1.5`` or ``True`` fail with one line."""
    if not isinstance(seed, bool):
        try:
            return operator.index(seed)
        except TypeError:
            pass
    raise TypeError(f"seed must be an integer, got {seed!r} ({type(seed).__name__})")


# --------------------------------------------------------------------------- load

def load(name: str, root: "str | Path | None" = None, split: Union[int, str, None] = None,
         transforms: Sequence[TransformSpec] = (), seed: int = 0, **options: Any) -> Task:
    """Load dataset ``name`` as a :class:`Task` (see ``docs/datasets.md``).

    ``name`` is normalised (case, ``-``/space -> ``_``). ``split`` picks a split (``"public"``,
    a Geom-GCN column ``i``, ``"per_class"``, ``"ratio"``; None = the dataset's standard one).
    ``transforms`` are names, ``(name, kwargs)`` pairs or callables, applied in order after the
    split. ``seed`` drives random splits, generators and seeded transforms. ``options`` are the
    dataset's keyword options (``zoo.datasets.list_datasets()`` / the docs list them).
    """
    spec = get_spec(name)
    check_options(spec, options)
    seed = _seed_of(seed)
    if isinstance(transforms, str) or (isinstance(transforms, tuple) and len(transforms) == 2
                                       and isinstance(transforms[0], str) and isinstance(transforms[1], Mapping)):
        transforms = [transforms]  # a single transform given bare
    root = mirror.checked_root(root)
    task = DATASETS.create(spec.name, root, split, int(seed), **{**spec.options, **options})
    task.provenance = provenance(spec.name, split, int(seed), transforms, options)
    resolved = [make_transform(t, int(seed)) for t in transforms]
    if resolved:
        fns = [t for t, _ in resolved]
        if task.data is not None:
            task.data = apply_transforms(task.data, fns)
            task.num_features = int(task.data.num_features)
        else:
            assert task.graphs is not None
            task.graphs = apply_transforms_to_graphs(task.graphs, fns)
            first = next((g[0] for g in task.graphs.values() if len(g)), None)
            if first is not None and first.x is not None:
                task.num_features = int(first.x.size(-1))
        # described after applying: fitted transforms report what they learnt (e.g. max degree)
        task.preprocessing = tuple(task.preprocessing) + tuple(
            t.describe() if isinstance(t, GraphTransform) else d for t, d in resolved)
    task.seal = Seal(task, functools.partial(load, name, root, split, transforms, seed, **options))
    return task


def _described(t: TransformSpec) -> Any:
    """A transform as a suite names it (canonical name, or ``[name, {options}]``); ``None``: a callable."""
    if isinstance(t, str):
        return TRANSFORMS.canonical(t)
    if isinstance(t, (tuple, list)) and len(t) == 2 and isinstance(t[0], str) and isinstance(t[1], Mapping):
        return [TRANSFORMS.canonical(t[0]), dict(t[1])]
    return None


def provenance(dataset: str, split: Union[int, str, None], seed: int, transforms: Sequence[TransformSpec],
               options: Mapping[str, Any]) -> Dict[str, Any]:
    """What :func:`load` was asked, as suite task keys; callables, which no key can name, go to
    ``undescribed``."""
    named = [_described(t) for t in transforms]
    out: Dict[str, Any] = {"dataset": dataset, "split": split, "data_seed": seed,
                           "transforms": [t for t in named if t is not None], "options": dict(options)}
    callables = [getattr(t, "__name__", type(t).__name__) for t, n in zip(transforms, named) if n is None]
    if callables:
        out["undescribed"] = f"the callable transform(s) {', '.join(callables)}"
    return out


# --------------------------------------------------------------------------- registered datasets' data

#: dataset name -> (task keys, fingerprint) of the last registered-dataset recipe fingerprinted
_LAST_SEEN: Dict[str, Tuple[Dict[str, Any], str]] = {}


def _load_recipe(name: str, task: Dict[str, Any]) -> Any:
    transforms = [t if isinstance(t, str) else (t[0], t[1]) for t in task.get("transforms") or ()]
    return load(name, split=task.get("split"), transforms=transforms, seed=task.get("data_seed", 0),
                **(task.get("options") or {}))


def recipe_fingerprint(name: str, task: Dict[str, Any]) -> str:
    """The fingerprint of the data a registered dataset's loader makes for ``task`` (suite task keys)."""
    value = _load_recipe(name, task).fingerprint()
    _LAST_SEEN[name] = (dict(task), value)
    return value


def data_change(name: str) -> str:
    """After ``name`` was registered again: how its data compares with the data last used under that
    name (``""`` when it was never used, or cannot be loaded now)."""
    seen = _LAST_SEEN.get(name)
    if seen is None:
        return ""
    task, before = seen
    try:
        now = recipe_fingerprint(name, task)
    except Exception:  # noqa: BLE001 - a loader that fails now fails with its own message when used
        return ""
    if now == before:
        return f"; its data is unchanged (fingerprint {now})"
    return (f"; it now loads other data (fingerprint {before} -> {now}), so its cells get new ids and runs "
            "recorded on the old data are not reused")


# --------------------------------------------------------------------------- helpers for loaders

def instantiate(dataset: str, root: Path, rel_files: Sequence[str], source: str,
                factory: Callable[[], Any], download: Optional[bool],
                expected: Optional[Mapping[str, Any]] = None) -> Any:
    """Stage ``rel_files`` from the mirrors, then build the dataset with ``factory()``.

    Missing files are left to the class's own download only when downloads are allowed;
    any failure then becomes a :class:`~zoo.datasets.mirror.MissingDataError`.
    ``factory`` should build a :func:`~zoo.datasets.cache.verified` class: the loaded data's
    statistics are compared with ``expected`` (the registry's) and with the processed
    folder's stamp; a mismatch re-processes once, then raises
    :class:`~zoo.datasets.cache.DataIntegrityError`.
    """
    missing = mirror.stage(dataset, root, rel_files)
    if missing and not mirror.downloads_allowed(download):
        raise mirror.missing_data_error(dataset, root, missing, source)
    for attempt in (1, 2):
        try:
            ds = factory()
        except cache.DataIntegrityError:
            raise
        except Exception as e:  # the class's download / processing of absent files failed
            if missing:
                raise mirror.missing_data_error(dataset, root, missing, source, cause=e) from e
            raise
        if not cache.subclass_of(type(ds)):
            return ds
        problem = cache.check_stats(dataset, ds, cache.stats_of(expected or {}))
        if problem is None:
            return ds
        folder = cache.processed_folder(ds)
        if attempt == 1:
            warnings.warn(f"re-processing {folder}: {problem}", RuntimeWarning, stacklevel=2)
            cache.discard(folder)
            continue
        raw_dir = getattr(ds, "raw_dir", folder.parent / "raw")
        raise cache.DataIntegrityError(
            f"{problem}, also after re-processing {folder} from the raw files in {raw_dir}. The raw files "
            f"are not the dataset {dataset!r} the zoo knows: delete {raw_dir} so they are staged again from "
            f"the mirror (${mirror.MIRROR_ENV}), or restore the original files.")
    raise AssertionError("unreachable")


def select_split(data: Data, split: Union[int, str, None], seed: int, default: Union[int, str],
                 train_per_class: int = 20, val_per_class: Optional[int] = 30, num_val: Optional[int] = None,
                 num_test: Optional[int] = None, train_ratio: float = 0.6, val_ratio: float = 0.2,
                 ratio_rounding: str = "round"
                 ) -> Tuple[Data, Union[int, str]]:
    """Set 1-D ``train/val/test_mask`` on ``data`` for ``split``; returns ``(data, label)``.

    ``"public"``: the dataset's own 1-D masks. ``int i`` / ``"geom_gcn"`` (= 0): column ``i`` of
    2-D Geom-GCN masks. ``"per_class"`` / ``"ratio"``: seeded random splits (see splits.py).
    """
    split = default if split is None else split
    data = data.clone()
    if isinstance(split, bool):
        raise TypeError("split must be an int or a name, not a bool")
    if isinstance(split, int):
        masks = tuple(column(getattr(data, f"{s}_mask"), split) for s in ("train", "val", "test"))
        label: Union[int, str] = split
    else:
        key = normalize_name(str(split))
        if key == "geom_gcn":
            return select_split(data, 0, seed, default)
        if key == "public":
            if getattr(data, "train_mask", None) is None or data.train_mask.dim() != 1:
                raise ValueError("this dataset has no single public split; use split=<int>, 'per_class' or 'ratio'")
            masks = (data.train_mask, data.val_mask, data.test_mask)
            label = "public"
        elif key in ("per_class", "random_per_class", "random"):
            masks = per_class_split(data.y, seed, train_per_class, val_per_class, num_val, num_test)
            label = f"random_per_class:seed={seed}"
        elif key in ("ratio", "random_ratio"):
            masks = ratio_split(data.num_nodes, seed, train_ratio, val_ratio, rounding=ratio_rounding)
            # the default keeps its old label (records name it); "floor" is named
            rounded = "" if ratio_rounding == "round" else f":{ratio_rounding}"
            label = f"random_ratio={train_ratio}/{val_ratio}{rounded}:seed={seed}"
        else:
            raise unknown_name_error("split", str(split), ["public", "geom_gcn", "per_class", "ratio"],
                                     hint="An int i picks Geom-GCN split i.")
    data.train_mask, data.val_mask, data.test_mask = masks
    return data, label


def edge_options(undirected: bool = False, dedupe_edges: bool = False, no_self_loops: bool = False,
                 remove_isolated: bool = False) -> List[str]:
    """Transform names for boolean dataset options, in a fixed, sensible order."""
    out = []
    if no_self_loops:
        out.append("no_self_loops")
    if undirected:
        out.append("undirected")
    if dedupe_edges and not undirected:  # ToUndirected already coalesces
        out.append("dedupe_edges")
    if remove_isolated:
        out.append("remove_isolated")
    return out


def transductive_task(name: str, data: Data, metric: str, source: str, split_label: Union[int, str],
                      option_transforms: Sequence[str], seed: int, num_classes: Optional[int] = None,
                      multilabel: bool = False, preprocessing: Sequence[str] = (),
                      ogb_evaluator: Optional[str] = None) -> Task:
    pre = list(preprocessing)
    for t in option_transforms:
        fn, desc = make_transform(t, seed)
        data = apply_transforms(data, [fn])
        pre.append(desc)
    if num_classes is None:
        num_classes = int(data.y.max()) + 1
    # Geom-GCN style 2-D masks were reduced to one column; drop nothing else.
    return Task(name=name, kind="transductive", metric=metric, num_features=int(data.num_features),
                num_classes=int(num_classes), multilabel=multilabel, data=data, split=split_label,
                preprocessing=tuple(pre), source=source, ogb_evaluator=ogb_evaluator)


# --------------------------------------------------------------------------- listing

def is_available(spec: DatasetSpec, root: Path) -> Tuple[bool, str]:
    """``(available, where)``: synthetic, cached under ``root``, in a mirror, or missing."""
    if spec.synthetic:
        return True, "synthetic"
    mirrors = mirror.mirror_dirs()
    files = [f for f in spec.raw_files if not f.endswith("/")]
    dirs = [f.rstrip("/") for f in spec.raw_files if f.endswith("/")]
    if all((root / f).is_file() for f in files) and all((root / d).is_dir() for d in dirs):
        return True, "cached"
    if not mirror.missing_files(root, files, mirrors) and all(
            (root / d).is_dir() or any((m / d).is_dir() for m in mirrors) for d in dirs):
        return True, "mirror"
    return False, "missing"


def list_datasets(root: "str | Path | None" = None) -> List[Dict[str, Any]]:
    """One row per dataset: name, kind, metric, sizes, source, options and availability."""
    base = mirror.resolve_root(root)
    rows = []
    for name in DATASETS.names():
        spec = DATASETS.get(name)
        available, where = is_available(spec, base)
        rows.append({
            "name": spec.name, "kind": spec.kind, "metric": spec.metric,
            "nodes": spec.stats.get("nodes"), "graphs": spec.stats.get("graphs"),
            "edges": spec.stats.get("edges"), "features": spec.stats.get("features"),
            "classes": spec.stats.get("classes"), "source": spec.source,
            "options": sorted(spec.options), "available": available, "where": where,
            "note": spec.note,
        })
    return rows


def format_datasets_table(rows: Optional[List[Dict[str, Any]]] = None) -> str:
    """A plain-text table of :func:`list_datasets` (for ``zoo list datasets``)."""
    rows = list_datasets() if rows is None else rows
    head = ("name", "kind", "metric", "nodes/graphs", "classes", "available", "source")
    lines = [[r["name"], r["kind"], r["metric"],
              str(r["graphs"] if r["kind"] == "graph" and r["graphs"] else
                  (r["nodes"] if r["nodes"] is not None else (r["graphs"] or "-"))),
              str(r["classes"] if r["classes"] is not None else "-"),
              ("yes (" + r["where"] + ")") if r["available"] else "no", r["source"]] for r in rows]
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head)] + [fmt.format(*l) for l in lines])
