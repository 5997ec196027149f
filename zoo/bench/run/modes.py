"""The run modes as objects: what one group of cells produces once its replicas are built.

Each mode implements a declaration of :mod:`zoo.bench.suite.measures` (its name and the metrics
its records hold) and produces one :class:`~zoo.trainer.results.RunResult` per replica; the
runner calls :meth:`Mode.produce` and never names a metric.

- ``train``: the training protocol (:meth:`zoo.trainer.cells.GroupRun.train`, as ``zoo.fit``'s;
  cells with ``rescale`` train with dynamic rescaling); cells with a ``prune_layers`` list are
  also pruned (as in ``prune_layers``).
- ``energy_at_init``: no training; the Laplacian energy of the last layer's output at
  initialisation (nonlocal paper §2, Tables 2/4/6) and its per-layer trace (Fig. 1).
- ``rank_at_init``: no training; the effective rank of the last layer's output at initialisation
  and its distance to equal rows, with the per-layer traces of both ranks and of that distance
  (rank collapse under masked attention, Wu et al. 2024).
- ``prune_layers``: train, then the test accuracy of the best state with one layer skipped
  (nonlocal paper Table 8).
- ``train_attention``: train, then how the last state distributes its attention (GATE paper):
  the mean self-attention ``alpha_vv`` over layers as a metric, per layer ``alpha_vv`` and
  attention entropy in the record's extra.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import torch

from zoo.bench.suite.measures import MODE_SPECS, ModeSpec
from zoo.bench.suite.schema import Cell
from zoo.diagnostics import attention_distribution, energy_trace, loglog_slope
from zoo.diagnostics.oversmoothing import layer_representations
from zoo.diagnostics.rank import RANKS, equal_rows_distance
from zoo.ops.dropout import ReplicaRandomness, replica_randomness
from zoo.trainer.cells import GroupRun
from zoo.trainer.results import RunResult
from zoo.trainer.resume import ResumeFile
from zoo.trainer.views import score


#: what rank_at_init measures on every layer's output (its metrics read the last layer's)
MEASURES = {**RANKS, "equal_rows_distance": equal_rows_distance}


class Mode:
    """A suite mode: ``spec`` declares it; :meth:`produce` makes the group's results."""

    spec: ModeSpec

    @property
    def name(self) -> str:
        return self.spec.name

    def produce(self, run: GroupRun, cells: Sequence[Cell], callbacks: Sequence[Any] = (),
                resume: Optional[ResumeFile] = None) -> List[RunResult]:
        """The group's results from its built replicas (:func:`zoo.trainer.cells.start_group`);
        ``callbacks`` (a progress bar) and ``resume`` (save / resume the loop's state) are for the
        modes that train."""
        raise NotImplementedError


class Train(Mode):
    spec = MODE_SPECS["train"]

    def prunes(self, cells: Sequence[Cell]) -> bool:
        return bool(cells[0].config["run"].get("prune_layers"))

    def produce(self, run: GroupRun, cells: Sequence[Cell], callbacks: Sequence[Any] = (),
                resume: Optional[ResumeFile] = None) -> List[RunResult]:
        results = run.train(callbacks=callbacks, resume=resume)
        if self.prunes(cells):
            prune(run.task, run.replicas, run.view, cells, results)
        return results


class PruneLayers(Train):
    spec = MODE_SPECS["prune_layers"]

    def prunes(self, cells: Sequence[Cell]) -> bool:
        return True


class EnergyAtInit(Mode):
    spec = MODE_SPECS["energy_at_init"]

    def produce(self, run: GroupRun, cells: Sequence[Cell], callbacks: Sequence[Any] = (),
                resume: Optional[ResumeFile] = None) -> List[RunResult]:
        task, replicas, view = run.task, run.replicas, run.view
        _need_one_graph(self, task)
        # Laplacian energy (omega_ij = 1, mu_i = deg_i + 1) of the final layer's output X^L, read from
        # the model's taps (before the decoder); the whole per-layer trace is kept in the record's extra.
        # energy_forward = "train" measures with dropout on; each run draws its masks from its own
        # seed's stream, so its number does not depend on the other runs of its group.
        training = cells[0].config["run"].get("energy_forward", "eval") == "train"
        rng = ReplicaRandomness([c.seed for c in cells])
        tokens = rng.tokens(view.x.device)
        traces = []
        for r in range(replicas.size):
            replicas.base.load_state_dict(replicas.state_of(r), strict=False)
            replicas.base.train(training)
            with replica_randomness(rng, tokens[r]):
                traces.append(energy_trace(replicas.base, view.edge_index, view.x).tolist())
        elapsed = time.perf_counter() - run.started
        return [_measured(run, elapsed, {"laplacian_energy": trace[-1]},
                          {"laplacian_energy_per_layer": trace, "laplacian_energy_loglog_slope": _slope(trace)})
                for trace in traces]


class RankAtInit(Mode):
    """The effective rank of every layer's output ``X^1 .. X^L`` of the untrained replicas (eval mode:
    dropout off), read from the model's taps (before a classifier head).

    The metric is the **effective** rank (Roy & Vetterli, :func:`zoo.diagnostics.effective_rank`), the
    exponential of the entropy of the normalised singular values: every direction counts by its
    share of the spectrum, so it falls to 1 exactly when the features reach a rank-one subspace and
    stays near the number of directions that carry weight otherwise.  The numerical (stable) rank
    ``||X||_F^2 / ||X||_2^2`` is governed by the top singular value alone: features with one large
    common direction read near 1 there while the rest of the spectrum is still full: not yet a
    collapse to a rank-one subspace.  The second metric, ``equal_rows_distance``
    (:func:`zoo.diagnostics.rank.equal_rows_distance`), says whether the nodes have become one point,
    which only mixing does: the product of the layers' weights alone aligns the features to one
    direction without making the nodes equal.  Every measure's per-layer trace goes to the record's
    extra (``effective_rank_per_layer``, ``numerical_rank_per_layer``, ``equal_rows_distance_per_layer``).
    """

    spec = MODE_SPECS["rank_at_init"]

    def produce(self, run: GroupRun, cells: Sequence[Cell], callbacks: Sequence[Any] = (),
                resume: Optional[ResumeFile] = None) -> List[RunResult]:
        task, replicas, view = run.task, run.replicas, run.view
        _need_one_graph(self, task)
        traces = []
        for r in range(replicas.size):
            replicas.base.load_state_dict(replicas.state_of(r), strict=False)
            replicas.base.eval()
            # one forward serves both ranks
            reps = layer_representations(replicas.base, view.edge_index, view.x)
            traces.append({name: [fn(x) for x in reps] for name, fn in MEASURES.items()})
        elapsed = time.perf_counter() - run.started
        return [_measured(run, elapsed, {name: trace[name][-1] for name in self.spec.metrics},
                          {f"{name}_per_layer": values for name, values in trace.items()})
                for trace in traces]


def _need_one_graph(mode: Mode, task: Any) -> None:
    """The suite's reader refuses these modes on other datasets (``ModeSpec.one_graph``); a run
    reached another way says so in one line."""
    if task.kind != "transductive":
        raise ValueError(f"{mode.name} needs a transductive dataset (one graph), not a {task.kind} one")


def _measured(run: GroupRun, elapsed: float, metrics: Dict[str, Any], extra: Dict[str, Any]) -> RunResult:
    """The result of one replica measured without training (modes with ``trains = False``)."""
    return RunResult(metrics=metrics, val_loss=None, train_loss=None, best_epoch=None, epochs_run=0,
                     stop_reason="measured", diverged=False, diverged_epoch=None,
                     wall_time_s=elapsed, time_per_epoch_s=0.0,
                     num_parameters=run.replicas.num_parameters(), extra=extra)


class TrainAttention(Train):
    spec = MODE_SPECS["train_attention"]

    def produce(self, run: GroupRun, cells: Sequence[Cell], callbacks: Sequence[Any] = (),
                resume: Optional[ResumeFile] = None) -> List[RunResult]:
        results = super().produce(run, cells, callbacks, resume)
        task, replicas, view = run.task, run.replicas, run.view
        if task.kind != "transductive":
            raise ValueError("train_attention reads the attention over one graph: it needs a transductive dataset")
        for r, res in enumerate(results):
            replicas.base.load_state_dict(replicas.state_of(r), strict=False)
            replicas.base.eval()
            dist = attention_distribution(replicas.base, view.edge_index, view.x)
            selfs = [a for a in dist["self_attention"] if a == a]  # nan: a layer without self-loops
            res.metrics["self_attention"] = sum(selfs) / len(selfs) if selfs else None
            res.extra["self_attention_per_layer"] = dist["self_attention"]
            res.extra["attention_entropy_per_layer"] = dist["entropy"]
        return results


MODES: Dict[str, Mode] = {m.name: m for m in (Train(), EnergyAtInit(), RankAtInit(), PruneLayers(),
                                              TrainAttention())}
assert set(MODES) == set(MODE_SPECS), "every declared mode has an implementation"


def get_mode(name: str) -> Mode:
    """The mode object of a suite's ``mode`` (names are validated when the suite is read)."""
    return MODES[name]


def _slope(trace: List[float]) -> Optional[float]:
    """Fig. 1 of the nonlocal paper: the log-log slope of the per-layer energy (None if undefined)."""
    try:
        return loglog_slope(trace)
    except ValueError:
        return None


def prune(task: Any, replicas: Any, view: Any, cells: Sequence[Cell], results: List[RunResult]) -> None:
    """Nonlocal paper Table 8: test accuracy of the best state with one layer skipped (1-based index)."""
    if task.kind != "transductive":
        raise ValueError("layer pruning is implemented for transductive datasets")
    layers = [int(v) for v in cells[0].config["run"]["prune_layers"]]
    best = [torch.stack([r.best_state[n] for r in results]) for n in replicas.names]  # type: ignore[index]
    base = replicas.base
    num_layers = getattr(base, "num_layers", None)
    pruned: List[Dict[str, Optional[float]]] = [dict() for _ in results]
    mask = view.masks["test"]
    try:
        for layer in layers:
            if num_layers is None or not 1 <= layer <= num_layers:
                raise ValueError(f"prune_layers: layer {layer} is outside 1..{num_layers}")
            base.skipped_layers = {layer - 1}
            with torch.no_grad():
                out = replicas.forward(*view.inputs(), train=False, params=best)
                acc = score(task, out[:, mask], view.y[mask]).tolist()
            for r, a in enumerate(acc):
                pruned[r][str(layer)] = a
    finally:
        base.skipped_layers = set()
    for r, res in enumerate(results):
        res.metrics["pruned"] = pruned[r]  # type: ignore[assignment]
        res.best_state = None
