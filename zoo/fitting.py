"""``zoo.fit``: train a model (seeds x inits as stacked replicas) with the benchmark runner's protocol.

The configuration is made into the same suite cells ``zoo bench`` / ``zoo train`` would run
(:func:`zoo.bench.suite.load.parse_suite`: the same validation, defaults and cell ids), and the
training layer's cell adapter turns them into a run exactly as the runner's driver does
(:func:`zoo.trainer.cells.start_group`: the task, models, ``TrainConfig``, dtype, seeds and stacked
replicas; :meth:`~zoo.trainer.cells.GroupRun.train`: the loop with the cells' training plugins), so
``zoo.fit`` and ``zoo bench`` give the same numbers for the same cells by construction.

This entry point sits above the suite layer (it speaks in suite cells) and ``zoo.trainer``; it
imports nothing from the runner (``zoo.bench.run``) and returns the trainer's
:class:`~zoo.trainer.history.History`.
"""
from __future__ import annotations

import contextlib
import copy
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from zoo.bench.suite import plugins as registries
from zoo.bench.suite.plugins import user_datasets
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import with_value
from zoo.callbacks import check_callbacks
from zoo.datasets.fingerprint import weights_fingerprint
from zoo.trainer.cells import TaskCache, resolve_device, start_group
from zoo.trainer.graphs import GraphFallback
from zoo.trainer.history import History, MetricsRecorder
from zoo.trainer.progress import ProgressBar, interactive
from zoo.trainer.tasks import TaskInput, task_input

__all__ = ["fit", "fit_cells", "fit_suite", "incompatible_inits"]


@contextlib.contextmanager
def _torch_threads(threads: Optional[int]) -> Iterator[None]:
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _as_list(name: str, value: Any) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return [value]
    out = list(value)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def _model_defaults(model_or_name: Any) -> Dict[str, Any]:
    """Suite keys of the model: a name / preset, or a ``zoo.build`` model's recorded configuration."""
    if isinstance(model_or_name, str):
        return {"model": model_or_name}
    if isinstance(model_or_name, nn.Module):
        config = getattr(model_or_name, "build_config", None)
        if not isinstance(config, dict):
            raise TypeError(f"zoo.fit trains models built by zoo.build (or loaded by zoo.load); "
                            f"{type(model_or_name).__name__} has no build_config")
        skip = ("name", "preset", "in_dim", "out_dim", "init", "init_kwargs")
        out = {"model": config["name"], **{k: v for k, v in config.items() if k not in skip and v is not None}}
        if config.get("norm_kwargs") == {}:
            out.pop("norm_kwargs")
        return out
    raise TypeError(f"model_or_name must be a model name (e.g. 'gatv2') or a zoo.build model, got "
                    f"{type(model_or_name).__name__}")


def fit_suite(model_or_name: Any, task: Any, *, seeds: Sequence[int], inits: Sequence[str] = (),
              name: str = "fit", title: Optional[str] = None, **keys: Any) -> Dict[str, Any]:
    """The raw suite of a fit: ``keys`` (trainer, model, run and dataset keys; ``None`` = the suite
    default) in ``[defaults]``, one grid point per seed and init.  ``task`` is a dataset name or the
    task keys of :func:`zoo.trainer.tasks.task_input`.  ``zoo.fit`` and ``zoo train`` both make their
    cells here, so the same options give the same cells (and cell ids)."""
    task_keys = {"dataset": task} if isinstance(task, str) else dict(task)
    if keys.get("dataset") is not None:  # it would silently replace the task
        raise ValueError(f"dataset={keys['dataset']!r} would replace the task given ({task_keys['dataset']!r}); give "
                         "the task once: zoo.fit / zoo.diagnose take it as their second argument, zoo train as --dataset")
    defaults: Dict[str, Any] = {**_model_defaults(model_or_name), **task_keys}
    for key, value in keys.items():
        if value is not None:
            defaults[key] = value
    grid: Dict[str, Any] = {"seed": list(seeds)}
    if len(inits) == 1:
        defaults["init"] = inits[0]
    elif inits:
        grid["init"] = list(inits)
    meta = {"name": name, **({"title": title} if title else {})}
    return {"suite": meta, "defaults": defaults, "grid": grid}


def incompatible_inits(model_or_name: Union[str, nn.Module], task: Any, inits: Sequence[str],
                       **options: Any) -> Dict[str, str]:
    """``{init: why}`` for each of ``inits`` that does not apply to the architecture ``zoo.fit`` would
    build from ``model_or_name`` and ``options`` (e.g. a balanced init with ``norm="lipschitz"``)."""
    options = dict(options)
    given = task_input(task, options)
    raw = fit_suite(model_or_name, given.keys, seeds=[0], inits=list(inits), **options)
    with user_datasets(given.user_specs):
        cells = parse_suite(raw, source="zoo.fit", validate_models=False, check_inits=False).cells
    out = {}
    for init, cell in zip(inits, cells):  # one seed: one cell per init, in order
        reason = registries.init_incompatibility(cell.config["model"])
        if reason is not None:
            out[init] = reason
    return out


def fit(model_or_name: Union[str, nn.Module], task: Any, *, optimizer: Optional[str] = None,
        lr: Optional[float] = None, epochs: Optional[int] = None, seeds: Union[int, Sequence[int]] = (0,),
        inits: Union[None, str, Sequence[str]] = None,
        callbacks: Sequence[Any] = (), device: Optional[str] = None, threads: Optional[int] = None,
        stacked: bool = True, keep_models: bool = True, data_root: Optional[str] = None,
        progress: Optional[bool] = None, check_every: Optional[int] = None, cuda_graphs: str = "auto",
        **options: Any) -> History:
    """Train ``model_or_name`` on ``task`` with the benchmark runner's protocol; returns a :class:`History`.

    Args:
        model_or_name: a model name or preset (``"gatv2"``, ``"gat.balance"``) whose options come
            from ``options``, or a model from ``zoo.build`` / ``zoo.load``: then every replica
            *starts from that model's weights* (their hash enters the cell id; ``inits`` must be
            unset; ``seeds`` only seed dropout; a float64 model trains in float64), and the model
            itself is not changed.
        task: a dataset name (``"cora"``; dataset options as ``split=...``, ``data.KEY=...``), a
            task from :func:`zoo.datasets.load` (its split, seed, transforms and options enter the
            cells as those keys; once its data is edited, its content's fingerprint too), or your own
            graph: a PyG ``Data`` or ``dgl.DGLGraph`` with masks (or ``split=(train_ratio,
            val_ratio)``), or ``zoo.datasets.Task.from_data(...)``; its content's fingerprint enters
            the cell id.
        optimizer, lr, epochs: the trainer's keys; every other trainer key (``patience``,
            ``select``, ``loss_threshold``, ``weight_decay``, ``lr_scheduler``, ``warmup_epochs``,
            ``grad_clip_norm``, ``precision``...), model option (``num_layers``,
            ``hidden_dim``, ``norm``...) and run key (``dtype="float64"``) goes in ``options``, as
            suite keys; unknown keys are a one-line error.  A key not given (or ``None``) takes the
            one default that a suite's ``[defaults]``, ``zoo train`` and ``zoo diagnose`` share
            (``docs/benchmarks.md``, "Defaults": Adam, lr 0.005, 200 epochs, ...).
        seeds, inits: one replica per (seed, init) pair, trained together (stacked: one forward
            pass for all; ``stacked=False`` runs them one at a time, the reference path).
        callbacks: objects with ``on_epoch_end(state)`` (:class:`zoo.callbacks.EpochState`: the
            replicas' parameters, gradients and metrics after every evaluated epoch), e.g.
            :class:`zoo.diagnostics.ConservationRecorder` or :class:`zoo.diagnostics.LayerRecorder`.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"`` (default: cuda when available).
        threads: torch intra-op threads during the fit, restored afterwards.  Default: **1 on the
            CPU, as the runner sets it** (``zoo bench --threads``): the zoo's graphs are small, so
            several threads mostly wait on each other and slow down sharply when the cores are
            shared (a GATv2 L = 16 Cora step: 5.8 s with torch's 2 threads vs 0.22 s with one, on
            a shared 2-core machine); ``None`` on a GPU leaves torch's setting.
        keep_models: keep each replica's selected and last parameters for :meth:`History.model`.
        progress: a tqdm bar over the epochs (:class:`zoo.trainer.progress.ProgressBar`); ``None``:
            shown where stderr is a terminal or in a notebook, not when writing to a log.
        check_every: epochs between the host's reads of the stop flags (``TrainConfig.check_every``;
            default: 1 on the CPU, 25 on a GPU); no number depends on it.  Callbacks that read the
            host make it 1.
        cuda_graphs: ``"auto"`` (default) replays the training epoch as CUDA graphs on a CUDA device
            where the run allows it and a replayed epoch equals an eager one (else eager: a replay
            that differs makes the fit train again eagerly from the start, with one warning, the
            callbacks seeing the epochs again; a capture or replay that raises is an error asking for
            a fresh process, which ``zoo bench`` starts itself), ``"on"`` requires it, ``"off"``
            never captures (``TrainConfig.cuda_graphs``, :mod:`zoo.trainer.graphs`); no number
            depends on it; ``results[r].extra["cuda_graphs"]`` says how the fit ran.

    Example::

        history = zoo.fit("gatv2", "cora", num_layers=10, inits=["xavier", "bal_o"], seeds=[0, 1],
                          optimizer="sgd", lr=0.05, epochs=100)
        history.metrics["val"]            # (epochs + 1, 4) validation accuracy per replica
        model = history.model("seed=0 init=bal_o")
    """
    callbacks = check_callbacks(callbacks)
    given, raw = _fit_suite(model_or_name, task, seeds, inits, threads,
                            dict(options, optimizer=optimizer, lr=lr, epochs=epochs))
    with user_datasets(given.user_specs):
        cells = _parsed(model_or_name, raw)
        if progress or (progress is None and interactive()):
            callbacks = [*callbacks, ProgressBar(cells[0].epochs)]
        try:
            return _fit_cells(model_or_name, given, cells, device=device, threads=threads, stacked=stacked,
                              keep_models=keep_models, data_root=data_root, callbacks=callbacks,
                              check_every=check_every, cuda_graphs=cuda_graphs)
        finally:  # a bar left by an error or Ctrl-C would stay on the screen
            for cb in callbacks:
                if isinstance(cb, ProgressBar):
                    cb.close()


def fit_cells(model_or_name: Union[str, nn.Module], task: Any, *, seeds: Union[int, Sequence[int]] = (0,),
              inits: Union[None, str, Sequence[str]] = None, **options: Any) -> List[Any]:
    """The cells ``zoo.fit`` would train for these arguments, nothing trained: suite cells
    (:class:`~zoo.bench.suite.schema.Cell`) with the ids of its ``History.cells`` (``zoo train``
    makes the same for the same options)."""
    given, raw = _fit_suite(model_or_name, task, seeds, inits, None, dict(options))
    with user_datasets(given.user_specs):
        return _parsed(model_or_name, raw)


def _parsed(model_or_name: Any, raw: Dict[str, Any]) -> List[Any]:
    """The fit's raw suite as cells; a run that starts from given weights has their hash in its id."""
    cells = parse_suite(raw, source="zoo.fit", validate_models=False).cells
    if isinstance(model_or_name, nn.Module):  # not the init's weights: these ones, by content
        digest = weights_fingerprint(model_or_name)
        cells = [with_value(c, "model", "weights", digest) for c in cells]
    return cells


def _fit_suite(model_or_name: Any, task: Any, seeds: Any, inits: Any, threads: Any,
               options: Dict[str, Any]) -> Tuple[TaskInput, Dict[str, Any]]:
    """``zoo.fit``'s arguments checked, made into its task and its raw suite (a key left ``None``
    takes the suite default)."""
    if inits is not None and options.get("init") is not None:
        raise ValueError(f"zoo.fit got init={options['init']!r} and inits={inits!r}: give one (inits compares several "
                         "inits side by side; init is one)")
    seed_list, init_list = _checked(model_or_name, seeds, inits, threads)
    from_weights = isinstance(model_or_name, nn.Module)
    given = task_input(task, options)  # a task of the wrong type is refused here
    if from_weights and options.get("dtype") is None:  # train a model's weights in their own precision
        dtypes = {p.dtype for p in model_or_name.parameters() if p.is_floating_point()}
        if dtypes == {torch.float64}:
            options["dtype"] = "float64"
    raw = fit_suite(model_or_name, given.keys, seeds=seed_list, inits=init_list, **options)
    if from_weights:
        init_name = model_or_name.build_config.get("init")
        if isinstance(init_name, str):
            raw["defaults"]["init"] = init_name  # recorded, not applied: the weights are the model's
    return given, raw


def _fit_cells(model_or_name: Any, given: TaskInput, cells: List[Any], *, device: Optional[str],
               threads: Optional[int], stacked: bool, keep_models: bool, data_root: Optional[str],
               callbacks: Sequence[Any], check_every: Optional[int] = None, cuda_graphs: str = "auto") -> History:
    """Train the fit's cells (a user's graph is a dataset meanwhile)."""
    from_weights = isinstance(model_or_name, nn.Module)
    if len({c.config["task"]["data_seed"] for c in cells}) > 1:  # data_seed="seed": a split per seed
        raise ValueError("data_seed='seed' draws each seed its own split, so the seeds are not replicas of one task "
                         "that train together: call zoo.fit once per seed (seeds=[s], data_seed=s), or run the "
                         "seeds as a suite (zoo bench)")
    if len({c.group for c in cells}) != 1:  # pragma: no cover - seeds and inits are group-free keys
        raise ValueError("zoo.fit trains one architecture; the options gave several")
    if cells[0].config["run"].get("prune_layers"):
        raise ValueError(f"prune_layers={cells[0].config['run']['prune_layers']!r} is a measurement of zoo bench (a "
                         "suite of mode prune_layers records each pruned layer's test accuracy); zoo.fit does not "
                         "prune: remove prune_layers, or run it as a suite")
    dev = resolve_device(device)
    if threads is None and dev.type == "cpu":
        threads = 1
    with _torch_threads(threads):
        loaded = TaskCache(data_root).get(cells[0].config["task"]) if given.task is None else given.task
        factories = None
        if from_weights:
            template = model_or_name
            factories = [lambda: copy.deepcopy(template) for _ in cells]
        labels = [f"seed={c.seed} init={c.init}" for c in cells]

        def train(graphs_mode: str) -> Tuple[Any, MetricsRecorder, List[Any]]:
            run = start_group([c.config for c in cells], loaded, dev, stacked=stacked, factories=factories,
                              cuda_graphs=graphs_mode, check_every=check_every,
                              keep_best_state=keep_models)  # copies of the selected states; the training is unchanged
            metrics = MetricsRecorder()
            return run, metrics, run.train(callbacks=[metrics, *callbacks], labels=labels)

        try:
            run, metrics, results = train(cuda_graphs)
        except GraphFallback as e:
            run, metrics, results = train(_eager_after(e))
            for res in results:
                res.extra["cuda_graphs"] = f"fell back ({e.reason})"
        elapsed = time.perf_counter() - run.started
    return _history(results, metrics, run.replicas, cells, labels, elapsed, keep_models)


def _eager_after(e: GraphFallback) -> str:
    """The ``cuda_graphs`` to fit again with after ``e`` — here only where nothing raised on the device;
    after a capture or replay that raised, this process's CUDA state is suspect: an error."""
    if e.poisoned:
        raise RuntimeError(f"zoo.fit: {e.reason}; after a failed capture or replay this process's random generators "
                           "and CUDA graph memory may be left inconsistent: fit again in a new Python process with "
                           "cuda_graphs='off' (zoo bench runs such a group again in a fresh process by itself)") from e
    warnings.warn(f"cuda_graphs: {e.reason}; training again eagerly from the start", RuntimeWarning, stacklevel=3)
    return "off"


def _checked(model_or_name: Any, seeds: Any, inits: Any, threads: Any) -> Tuple[List[int], List[str]]:
    """``zoo.fit``'s arguments checked (one clear error each); returns the seeds and inits as lists."""
    seed_list = _as_list("seeds", seeds)
    for s in seed_list:
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"seeds must be integers, got {s!r}")
    init_list = [str(i) for i in _as_list("inits", inits)]
    if isinstance(model_or_name, nn.Module) and init_list:
        raise ValueError("inits re-initialise a model, but zoo.fit was given a model to train from its weights; "
                         "pass the model's name (e.g. 'gatv2') with its options to compare inits")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an integer >= 1 (or None), got {threads!r}")
    return seed_list, init_list


def _history(results: Sequence[Any], metrics: MetricsRecorder, replicas: Any, cells: Sequence[Any],
             labels: List[str], elapsed: float, keep_models: bool) -> History:
    import numpy as np

    last = [replicas.state_of(r) for r in range(replicas.size)] if keep_models else None
    final = [{**res.metrics, "train_loss": res.train_loss, "val_loss": res.val_loss, "stop_reason": res.stop_reason,
              "epochs_run": res.epochs_run, "diverged": res.diverged} for res in results]
    return History(
        labels=labels, seeds=[c.seed for c in cells], inits=[c.init for c in cells],
        epochs=np.array(metrics.epochs), metrics={k: np.array(v, dtype=float) for k, v in metrics.rows.items()},
        best_epoch=[res.best_epoch for res in results], final=final, results=list(results), cells=list(cells),
        config=cells[0].config, wall_time_s=elapsed,
        _base=replicas.base if keep_models else None, _last=last)
