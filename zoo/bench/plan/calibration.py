"""Calibrating the cost model (:mod:`zoo.bench.plan.cost`) on finished records: non-negative least
squares on the relative error, per device kind, and its leave-one-out quality (``zoo bench calibrate``)."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import nnls

from zoo.bench.plan.cost import (TERMS, CostModel, CostModelError, dataset_size, features, positive_int,
                                  shipped_table)


@dataclass(frozen=True)
class Observation:
    """One finished group of the records: what ran, and how long it took."""

    suite: str
    group: str
    config: Mapping[str, Any]
    replicas: int
    epochs: int            # the group's longest run (the stacked replicas ran that long)
    mode: str
    wall_time_s: float


def device_kind(record: Mapping[str, Any]) -> str:
    """``cpu`` or ``cuda``: the kind of device a record ran on (its ``device`` is ``cpu (...)`` or a GPU's
    name; records without one ran on the CPU)."""
    return "cpu" if str(record.get("device") or "cpu").startswith("cpu") else "cuda"


def observations(records: Iterable[Mapping[str, Any]], device: Optional[str] = None) -> List[Observation]:
    """Finished groups from records (``status`` ok, with ``group_wall_time_s``); a group split by
    ``--max-replicas`` or run in several sittings is one observation per sitting.  ``device``
    (``cpu`` / ``cuda``) keeps only the records that ran on that kind: a model is fitted per device,
    and one GPU group among CPU ones is a 40x outlier."""
    by: Dict[Tuple[str, str, float], List[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("status", "ok") != "ok" or not r.get("group_wall_time_s"):
            continue
        if device is not None and device_kind(r) != device.split(":")[0]:
            continue
        by.setdefault((r.get("suite", ""), r.get("group", r.get("id", "")), float(r["group_wall_time_s"])),
                      []).append(r)
    out = []
    for (suite, group, wall), rs in sorted(by.items()):
        first = rs[0]
        epochs = max(int(r.get("epochs_run") or 0) for r in rs)
        mode = "energy_at_init" if first.get("stop_reason") == "measured" else "train"
        out.append(Observation(suite, group, first["config"], int(first.get("group_size") or len(rs)), epochs, mode,
                               wall))
    return out


def design(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]]) -> Tuple[np.ndarray, np.ndarray]:
    """Rows of :data:`TERMS` and targets, both per replica-epoch."""
    xs, ys = [], []
    for o in obs:
        passes = 1.0 if o.mode == "energy_at_init" else o.epochs + 1.0
        xs.append(features(o.config, o.replicas, table, o.mode).vector())
        ys.append(o.wall_time_s / (passes * o.replicas))
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)


def nnls_relative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising ``sum((x @ c / y - 1)^2)`` (relative error, so a
    10-second group weighs as much as a 10-hour one): ``scipy.optimize.nnls`` (Lawson-Hanson) on the
    rows divided by ``y``."""
    a = x / y[:, None]
    scale = np.where(a.max(0) > 0, a.max(0), 1.0)  # column scaling keeps the solve well conditioned
    coef, _ = nnls(a / scale, np.ones(len(y)))
    return coef / scale


def _suite_factors(obs: Sequence[Observation], ratio: np.ndarray, shrink: float = 2.0
                   ) -> Tuple[Dict[str, float], float]:
    """``(per-suite factors, unseen-suite factor)``.

    A suite's factor is the geometric mean of its groups' actual / predicted, shrunk toward the
    unseen-suite factor for suites with few groups (``n / (n + shrink)`` of the log).  The
    unseen-suite factor is the suites' typical factor: the median over suites of each suite's mean
    log ratio (one vote per suite: neither one large suite nor one far-off suite sets it).  Not 1: the fit
    minimises ``(predicted / actual - 1)^2``, which costs an over-prediction by a factor k more
    than an under-prediction by the same factor, so with the scatter between suites the fitted
    coefficients predict low and each suite's own factor lifts it."""
    logs: Dict[str, List[float]] = {}
    for o, r in zip(obs, ratio):
        logs.setdefault(o.suite, []).append(math.log(r))
    prior = statistics.median(sum(v) / len(v) for v in logs.values()) if logs else 0.0
    factors = {s: math.exp((sum(v) + shrink * prior) / (len(v) + shrink)) for s, v in sorted(logs.items())}
    return factors, math.exp(prior)


def fit(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]], per_suite: bool = True,
        device: str = "cpu", fitted_on: str = "") -> CostModel:
    """Fit the coefficients (and per-suite factors, with the factor of a suite the records lack:
    :func:`_suite_factors`) on the trained groups of ``obs``, and one factor per other mode (energy
    at initialisation) on the rest."""
    trained = [o for o in obs if o.mode == "train"]
    if len(trained) < len(TERMS):
        raise CostModelError(f"calibration needs at least {len(TERMS)} finished trained groups, got {len(trained)}")
    x, y = design(trained, table)
    coef = nnls_relative(x, y)
    pred = np.maximum(x @ coef, 1e-12)
    factors, unseen = _suite_factors(trained, y / pred) if per_suite else ({}, 1.0)
    modes: Dict[str, List[float]] = {}
    for o in obs:
        if o.mode != "train":
            xo, yo = design([o], table)
            modes.setdefault(o.mode, []).append(math.log(yo[0] / max(float(xo[0] @ coef), 1e-12)))
    return CostModel({t: float(c) for t, c in zip(TERMS, coef)}, factors, device, fitted_on,
                     {m: math.exp(sum(v) / len(v)) for m, v in sorted(modes.items())}, unseen_suite_factor=unseen)


@dataclass
class FitQuality:
    """Leave-one-out errors of group wall time: median and 90th percentile of the factor
    ``max(pred/actual, actual/pred)``, and R^2 of log wall time."""

    groups: int
    median_factor: float
    p90_factor: float
    r2_log: float
    unit: str = "groups"   # what a point is: a group, or a suite (leave_one_suite_out)

    def describe(self) -> str:
        return (f"{self.groups} {self.unit}: median error x{self.median_factor:.2f}, 90th percentile "
                f"x{self.p90_factor:.2f}, R^2 (log wall time) {self.r2_log:.2f}")


def quality(actual: Sequence[float], predicted: Sequence[float], unit: str = "groups") -> FitQuality:
    la = np.log(np.asarray(actual, dtype=float))
    lp = np.log(np.maximum(np.asarray(predicted, dtype=float), 1e-12))
    factor = np.exp(np.abs(la - lp))
    ss_res = float(((la - lp) ** 2).sum())
    ss_tot = float(((la - la.mean()) ** 2).sum())
    return FitQuality(len(la), float(np.median(factor)), float(np.quantile(factor, 0.9)),
                      1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"), unit)


def leave_one_out(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]],
                  per_suite: bool = True) -> FitQuality:
    """Each group's wall time predicted by a model fitted on all the others."""
    predicted = []
    for i, o in enumerate(obs):
        model = fit([p for j, p in enumerate(obs) if j != i], table, per_suite)
        epochs = 0 if o.mode == "energy_at_init" else o.epochs
        predicted.append(model.group_seconds([o.config] * o.replicas, epochs, table, o.mode, o.suite))
    return quality([o.wall_time_s for o in obs], predicted)


def leave_one_suite_out(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]],
                        per_suite: bool = True) -> FitQuality:
    """Each suite predicted by a model fitted on the other suites' records, as if it had none yet
    (its groups get the unseen-suite factor); one point per suite (the geometric means of its
    groups' actual and predicted times), so the error is that of a new suite's estimate, whatever
    its size."""
    predicted, actual = [], []
    for suite in sorted({o.suite for o in obs}):
        model = fit([o for o in obs if o.suite != suite], table, per_suite)
        logs = [(math.log(o.wall_time_s), math.log(max(model.group_seconds(
                    [o.config] * o.replicas, 0 if o.mode == "energy_at_init" else o.epochs, table, o.mode, o.suite),
                    1e-12))) for o in obs if o.suite == suite]
        actual.append(math.exp(sum(a for a, _ in logs) / len(logs)))
        predicted.append(math.exp(sum(p for _, p in logs) / len(logs)))
    return quality(actual, predicted, "suites")


def size_cost(config: Mapping[str, Any], replicas: int, epochs: Optional[int] = None,
              table: Optional[Mapping[str, Mapping[str, Any]]] = None) -> float:
    """The cost ``group_cost`` (:mod:`zoo.bench.plan.shards`) used before this model, kept to compare with it: graph
    size (nodes + edges) x layers x epochs (``epochs``: those run, else the cap) x replicas."""
    size = dataset_size(config["task"], table if table is not None else shipped_table())
    layers = positive_int((config["model"].get("kwargs") or {}).get("num_layers"), 2)
    cap = int((config.get("train") or {}).get("epochs") or 1)
    return float(size["nodes"] + size["edges"]) * layers * max(cap if epochs is None else epochs, 1) * replicas


def proportional_leave_one_out(obs: Sequence[Observation], cost: Sequence[float]) -> FitQuality:
    """The same error for a cost that is only proportional to time (the old ``group_cost``):
    the scale is the geometric mean of wall / cost over the other groups."""
    logs = [math.log(o.wall_time_s / max(c, 1e-12)) for o, c in zip(obs, cost)]
    total = sum(logs)
    predicted = [c * math.exp((total - lg) / (len(logs) - 1)) for c, lg in zip(cost, logs)]
    return quality([o.wall_time_s for o in obs], predicted)
