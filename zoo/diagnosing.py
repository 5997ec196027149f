"""``zoo.diagnose`` / ``zoo diagnose`` (beside ``zoo.fit``, above the diagnostics it uses): train briefly (or start from saved weights), record every
layer's diagnostics each epoch, and write one self-contained HTML page that shows why the model
trains or does not (:mod:`zoo.diagnostics.page`), e.g. Xavier vs Bal_O at L = 10 on Cora.

The training is ``zoo.fit`` (the benchmark runner's protocol), with a
:class:`~zoo.diagnostics.recorders.LayerRecorder` as callback; the configurations compared are
the replicas of that fit (``inits`` x ``seeds``).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
from torch import nn

from zoo._io import output_file, user_path
from zoo.diagnostics.page import render_page
from zoo.diagnostics.recorders import LAYER_KEYS, METRIC_KEYS, LayerRecorder
from zoo.diagnostics.verdict import verdict
from zoo import fitting
from zoo.loading import load
from zoo.trainer.tasks import as_task

__all__ = ["diagnose", "Diagnosis", "flat_config"]

PathLike = Union[str, Path]


@dataclass
class Diagnosis:
    """What ``zoo.diagnose`` made: the page (``html``; ``path`` when written), the recorded numbers
    (``data``: :meth:`LayerRecorder.arrays` + selected epochs and final metrics), the verdict and
    the fit's :class:`~zoo.trainer.history.History` (a list of them when configurations were
    trained separately)."""

    html: str
    data: Dict[str, Any]
    verdict: str
    history: Any = field(repr=False)
    path: Optional[Path] = None
    seconds: float = 0.0


def flat_config(config: Mapping[str, Any]) -> Dict[str, Any]:
    """A cell configuration as flat ``key: value`` rows for the side-by-side table."""
    m, t, task = config["model"], config["train"], config["task"]
    rows: Dict[str, Any] = {"model": m["name"], "dataset": task["dataset"], "split": task.get("split"),
                            "init": m["init"], "norm": m["norm"], **m.get("kwargs", {})}
    for k in ("optimizer", "lr", "epochs", "select", "patience", "weight_decay", "loss_threshold"):
        rows[k] = t.get(k)
    rows["seed"] = config["run"]["seed"]
    rows["dtype"] = config["run"]["dtype"]
    return rows


def short_labels(history: Any) -> List[str]:
    """Replica names for the page: the init alone when every replica has the same seed, the seed
    alone when every replica has the same init, else both."""
    seeds, inits = history.seeds, history.inits
    if len(set(seeds)) == 1:
        return list(inits)
    if len(set(inits)) == 1:
        return [f"seed {s}" for s in seeds]
    return [f"{i}, seed {s}" for s, i in zip(seeds, inits)]


def _source_model(model: Any, cell: Optional[str], seed: Optional[int]) -> Any:
    """A name stays a name; a model file or a results folder becomes the loaded model."""
    if isinstance(model, nn.Module) or not isinstance(model, (str, Path)):
        return model
    path = Path(model)
    if path.suffix == ".safetensors" or path.is_dir() or path.is_file():
        return load(path, cell=cell, seed=seed)
    return str(model)


def _task_of(model: Any, task: Any, options: Dict[str, Any]) -> Any:
    """The task every configuration trains on: as given (a raw graph made a task once, so that the
    configurations compared share its masks), else the dataset a model file kept by ``zoo bench`` ran on."""
    if task is not None:
        return as_task(task, options)
    header = getattr(model, "saved_header", None) or {}
    config = (header.get("extra") or {}).get("config")
    if config:
        return config["task"]["dataset"]
    raise ValueError("zoo.diagnose needs a task as its second argument, as zoo.fit does (zoo.diagnose(model, 'cora'), "
                     "a task from zoo.datasets.load, a PyG Data or a dgl.DGLGraph; the CLI's --dataset): the model "
                     "does not say which task it was trained on")


def _check_one_graph(task: Any) -> None:
    """The page reads energies and attention over one graph: a task of many graphs is refused up front."""
    if isinstance(task, str):
        from zoo.datasets import get_spec

        name, kind = task, get_spec(task).kind
    else:
        name, kind = getattr(task, "name", "the task"), getattr(task, "kind", "transductive")
    if kind != "transductive":
        raise ValueError(f"diagnosis reads every layer's energies and attention over one graph, but {name} is "
                         f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} task of many graphs: diagnose on a "
                         "transductive dataset (e.g. cora, cornell)")


def _compatible_inits(model: Any, task: Any, inits: Union[None, str, Sequence[str]], variant: Mapping[str, Any],
                      **options: Any) -> Optional[List[str]]:
    """``inits`` without those that do not apply to this configuration (a balanced init with a norm
    that breaks the conservation law), each excluded one named in a warning; ``None``: no inits given."""
    if inits is None or isinstance(model, nn.Module):
        return None
    wanted = [inits] if isinstance(inits, str) else list(inits)
    dropped = fitting.incompatible_inits(model, task, wanted, **options)
    where = ", ".join(f"{k}={v}" for k, v in variant.items()) or "the configuration"
    for init, reason in dropped.items():
        warnings.warn(f"zoo.diagnose: init {init!r} excluded for {where}: {reason}", UserWarning, stacklevel=3)
    return [i for i in wanted if i not in dropped]


def _variants(model: Any, compare: Optional[Sequence[Mapping[str, Any]]], options: Dict[str, Any]
              ) -> List[Dict[str, Any]]:
    """The separately trained configurations: ``compare`` as given, else one per model of a
    comma-separated name (``"san_pre_ln,san_nonlocal"``) times one per norm of a list."""
    if compare is not None:
        if isinstance(compare, (str, Mapping)) or not compare or any(not isinstance(c, Mapping) for c in compare):
            raise TypeError("compare must be a non-empty list of option tables, e.g. [{'norm': 'none'}, "
                            "{'norm': 'pairnorm'}]")
        return [dict(c) for c in compare]
    models = [m.strip() for m in model.split(",") if m.strip()] if isinstance(model, str) and "," in model else [None]
    norms = options.get("norm")
    norms = list(norms) if isinstance(norms, (list, tuple)) else [None]
    return [{k: v for k, v in (("model", m), ("norm", n)) if v is not None} for m in models for n in norms]


def _merge(parts: List[Dict[str, Any]], names: List[str]) -> Dict[str, Any]:
    """One data table from several fits: replicas side by side, epochs the union (nan where a fit
    did not record), layers padded to the deepest."""
    if len(parts) == 1:
        return parts[0]
    epochs = sorted({int(e) for p in parts for e in p["epochs"]})
    index = {e: i for i, e in enumerate(epochs)}
    out: Dict[str, Any] = {"epochs": np.array(epochs), "labels": [], "best_epoch": [], "final": []}
    for name, p in zip(names, parts):
        out["labels"] += [f"{name} {label}" if len(p["labels"]) > 1 else name for label in p["labels"]]
        out["best_epoch"] += p["best_epoch"]
        out["final"] += p["final"]
    for key in (*LAYER_KEYS, *METRIC_KEYS):
        if not all(key in p for p in parts):
            continue
        layered = parts[0][key].ndim == 3
        width = max(p[key].shape[-1] for p in parts) if layered else None
        blocks = []
        for p in parts:
            arr = p[key]
            shape = (len(epochs), arr.shape[1], width) if layered else (len(epochs), arr.shape[1])
            block = np.full(shape, np.nan)
            rows = [index[int(e)] for e in p["epochs"]]
            if layered:
                block[rows, :, : arr.shape[-1]] = arr
            else:
                block[rows] = arr
            blocks.append(block)
        out[key] = np.concatenate(blocks, axis=1)
    return out


def diagnose(model: Any, task: Any = None, *, inits: Union[None, str, Sequence[str]] = None,
             epochs: Optional[int] = None, seeds: Union[int, Sequence[int]] = (0,), optimizer: Optional[str] = None,
             lr: Optional[float] = None, every: int = 1, out: Optional[PathLike] = None, title: Optional[str] = None,
             compare: Optional[Sequence[Mapping[str, Any]]] = None,
             cell: Optional[str] = None, seed: Optional[int] = None, device: Optional[str] = None,
             progress: Optional[bool] = None, **options: Any) -> Diagnosis:
    """Diagnose ``model`` on ``task`` and render the page (written to ``out`` when given).

    Args:
        model: a model name (options such as ``num_layers``, ``norm``, ``hidden_dim`` in
            ``options``), several comma-separated (``"san_pre_ln,san_nonlocal"``: compared side by
            side), a ``zoo.build`` / ``zoo.load`` model, a model file written by ``zoo.save``,
            or a ``zoo bench --save-weights`` results folder with ``cell`` / ``seed`` (saved weights
            are the starting point; ``epochs=0`` only looks at them).
        task: what ``zoo.fit`` trains on — a dataset name (``"cora"``), a task from
            :func:`zoo.datasets.load`, a PyG ``Data`` or ``dgl.DGLGraph`` with masks (or
            ``split=(train_ratio, val_ratio)`` in ``options``) or ``zoo.datasets.Task.from_data(...)``;
            transductive: energies and attention are read over its graph.  For a model file kept
            by ``zoo bench`` it defaults to the run's dataset.
        inits: inits to compare (e.g. ``["xavier", "bal_o"]``): one replica per init and seed,
            trained together.  ``norm=[...]`` (a list) or ``compare=[{option: value}, ...]``
            compare configurations that are trained separately (other models, norms, depths).
        epochs, optimizer, lr, options: the training (``zoo.fit``: a key not given takes the
            defaults every entry point shares, ``docs/benchmarks.md``, "Defaults"); ``every``: record
            every ``every`` epochs (the first and last state always).
        progress: ``zoo.fit``'s progress bar (``None``: where stderr is a terminal or in a notebook).

    Example::

        d = zoo.diagnose("gat", "cora", num_layers=10, inits=["xavier", "bal_o"], optimizer="sgd", lr=0.05,
                         epochs=50, out="diagnose.html")
        print(d.verdict)
    """
    start = time.perf_counter()
    source = _source_model(model, cell, seed)
    options = dict(options)
    task = _task_of(source, task, options)
    _check_one_graph(task)
    variants = _variants(source, compare, options)
    parts, names, histories, configs = [], [], [], []
    for variant in variants:
        chosen = variant.get("model", source)
        opts = {**options, **{k: v for k, v in variant.items() if k != "model"}}
        kept = _compatible_inits(chosen, task, inits, variant, optimizer=optimizer, lr=lr, epochs=epochs,
                                 **opts)
        if kept == []:
            continue
        recorder = LayerRecorder(every=every)
        history = fitting.fit(chosen, task, optimizer=optimizer, lr=lr, epochs=epochs, seeds=seeds, inits=kept,
                      callbacks=[recorder], device=device, keep_models=False, progress=progress, **opts)
        data = recorder.arrays()
        data["labels"] = short_labels(history)
        data["best_epoch"] = list(history.best_epoch)
        data["final"] = list(history.final)
        parts.append(data)
        names.append(", ".join(f"{v}" if k == "model" else f"{k}={v}" for k, v in variant.items()) or "")
        histories.append(history)
        configs += [flat_config(c.config) for c in history.cells]
    if not parts:
        raise ValueError(f"zoo.diagnose: no init of {inits!r} applies to any configuration compared (see the warnings)")
    data = _merge(parts, names)
    text = verdict(data)
    first = configs[0]
    models = sorted({c["model"] for c in configs}, key=[c["model"] for c in configs].index)
    layers = first.get("num_layers")
    page_title = title or (f"Why does {' vs '.join(models)}{f' (L = {layers})' if layers else ''} train or not? "
                           f"{first['dataset']}")
    fit_time = sum(h.wall_time_s for h in histories)
    trained = histories[0].config["train"]  # the keys given, or their defaults
    subtitle = (f"{len(configs)} configuration(s), {trained['epochs']} epochs, {trained['optimizer']} "
                f"lr {trained['lr']}; fit {fit_time:.1f} s")
    page = render_page(data, title=page_title, configs=configs, subtitle=subtitle, verdict_text=text)
    path = None
    if out is not None:
        path = _write(user_path(out), page)
    return Diagnosis(html=page, data=data, verdict=text, history=histories[0] if len(histories) == 1 else histories,
                     path=path, seconds=time.perf_counter() - start)


def _write(path: Path, page: str) -> Path:
    """Write the page atomically (a reader never sees half a page)."""
    if path.suffix.lower() not in (".html", ".htm"):
        path = path / "diagnose.html" if path.is_dir() or not path.suffix else path
    path = output_file(path, "diagnose.html")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
