"""Calibrating the cost model (:mod:`zoo.bench.plan.cost`) on finished records: non-negative least
squares on the relative error, per device kind, and its leave-one-out quality (``zoo bench calibrate``).

What a group cost: on a GPU its wall time (``group_wall_time_s``); on the CPU the CPU time its process
used (``group_cpu_time_s``), which a shared machine's load does not inflate as it does the wall time.
Records written before they carried it have only the wall time: :func:`time_basis` puts those on the
CPU-time scale by the CPU / wall share the other groups measured, and says how many groups had each.
Those groups shape the coefficients; a suite's level (its factor) is set by its measured groups where it
has some (:func:`_suite_factors`): a share cannot know the load each earlier group ran under."""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import nnls

from zoo.bench.plan.cost import (LONG_RUN_EPOCHS, TERMS, CostModel, CostModelError, dataset_size, depth_key,
                                  features, positive_int, shape_key, shipped_table)


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
    cpu_time_s: Optional[float] = None   # the group's process CPU time, where its records carry it (CPU only)
    wall_share: float = 1.0              # the factor a group without it takes its wall time by (time_basis)
    commit: str = ""                     # the code it ran (its records' ``commit``)
    machine: str = "unknown"             # the CPU it ran on (:func:`machine_key`)
    setup_free: bool = False             # the difference of two lengths of one group (:func:`without_setup`)

    @property
    def seconds(self) -> float:
        """The time the fit is on: the group's CPU time where known, else its wall time x ``wall_share``."""
        return self.cpu_time_s if self.cpu_time_s is not None else self.wall_time_s * self.wall_share


def device_kind(record: Mapping[str, Any]) -> str:
    """``cpu`` or ``cuda``: the kind of device a record ran on (its ``device`` is ``cpu (...)`` or a GPU's
    name; records without one ran on the CPU)."""
    return "cpu" if str(record.get("device") or "cpu").startswith("cpu") else "cuda"


#: the machine of records that do not name their CPU (``float_order.cpu``: records before it was written)
UNKNOWN_MACHINE = "unknown"


def machine_key(record: Mapping[str, Any]) -> str:
    """The machine a record ran on: its ``float_order.cpu`` with whether its ``isa`` has ``avx512f``
    (``Intel(R) Xeon(R) Processor, avx512f``; ``AMD EPYC, no avx512f``: two AMD EPYCs, with and without
    AVX-512, ran records), or :data:`UNKNOWN_MACHINE` for a record without ``float_order.cpu``."""
    order = record.get("float_order")
    cpu = order.get("cpu") if isinstance(order, Mapping) else None
    if not cpu:
        return UNKNOWN_MACHINE
    return f"{cpu}, {'' if 'avx512f' in (order.get('isa') or ()) else 'no '}avx512f"


def observations(records: Iterable[Mapping[str, Any]], device: Optional[str] = None) -> List[Observation]:
    """Finished groups from records (``status`` ok, with ``group_wall_time_s``, and on the CPU their
    ``group_cpu_time_s`` where they carry it); a group split by ``--max-replicas`` or run in several
    sittings is one observation per sitting.  ``device`` (``cpu`` / ``cuda``) keeps only the records that
    ran on that kind: a model is fitted per device, and one GPU group among CPU ones is a 40x outlier."""
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
                               wall, _cpu_time(first), commit=str(first.get("commit") or ""),
                               machine=machine_key(first)))
    return out


def _cpu_time(record: Mapping[str, Any]) -> Optional[float]:
    """A CPU record's ``group_cpu_time_s`` (a GPU group's cost is its wall time: none there)."""
    value = record.get("group_cpu_time_s")
    return float(value) if device_kind(record) == "cpu" and value else None


#: trained groups a fit needs: the four counts every family has (non-negative least squares keeps the terms
#: few groups constrain at zero: the cuda entry's 5 groups fit its edge and dropout terms to 0)
MIN_TRAINED_GROUPS = 4

#: suites with measured groups needed for their typical factor to be the unseen suites' (:func:`_suite_factors`)
MIN_MEASURED_SUITES = 3

#: ``zoo bench calibrate --time``: what the fit is on
TIME_BASES = ("auto", "cpu", "wall")


@dataclass(frozen=True)
class TimeBasis:
    """What a fit's times are: ``cpu`` groups on their measured CPU time, ``wall`` groups on their wall
    time x a share (:func:`wall_shares`): their suite's own in ``suites`` (suites with groups run again,
    ``matched`` groups in all), else ``share``."""

    cpu: int
    wall: int
    share: float
    matched: int = 0
    suites: Mapping[str, float] = field(default_factory=dict)

    def quantity(self) -> str:
        """The time the fit predicts, as its leave-one-out line names it."""
        if not self.wall:
            return "CPU time"
        return "wall time" if not self.cpu else f"CPU time; {self.wall} from wall"

    def short(self) -> str:
        """For ``fitted_on`` (the estimates print it)."""
        if not self.cpu or not self.wall:
            return "times: CPU" if self.cpu else "times: wall"
        own = f", in {len(self.suites)} suite(s) their own" if self.suites else ""
        return f"times: CPU ({self.cpu} measured, {self.wall} their wall x {self.share:.3f}{own})"

    def describe(self) -> str:
        if not self.cpu:
            return f"all {self.wall} groups on their wall time (no record carries group_cpu_time_s)"
        text = f"{self.cpu} groups on their CPU time (group_cpu_time_s)"
        if not self.wall:
            return text
        if not self.matched:
            return (f"{text}, {self.wall} without it on their wall time x {self.share:.3f} (the median CPU / wall time "
                    "of the measured groups: their load; it does not know code that got faster since)")
        own = ", ".join(f"{k} x{v:.3f}" for k, v in sorted(self.suites.items()))
        return (f"{text}, {self.wall} without it on their wall time x their suite's median of CPU time / earlier wall "
                f"time over its groups run again ({self.matched} groups: {own}; the earlier load and the code's "
                f"speed-up since), x{self.share:.3f} in the other suites (the median of those)")


def per_replica_epoch(o: Observation, seconds: float) -> float:
    """``seconds`` of ``o`` per replica and epoch (an epoch's pass and the evaluation after it)."""
    return seconds / ((1.0 if o.mode == "energy_at_init" else o.epochs + 1.0) * o.replicas)


def _rerun_ratios(obs: Sequence[Observation]) -> Dict[str, List[float]]:
    """Per suite, each group without a CPU time that was run again with one (the same suite and group,
    e.g. in another records folder): CPU time again / wall time before, per replica-epoch."""
    measured: Dict[Tuple[str, str], List[float]] = {}
    for o in obs:
        if o.cpu_time_s is not None:
            measured.setdefault((o.suite, o.group), []).append(per_replica_epoch(o, o.cpu_time_s))
    out: Dict[str, List[float]] = {}
    for o in obs:
        if o.cpu_time_s is None and (o.suite, o.group) in measured:
            out.setdefault(o.suite, []).append(statistics.median(measured[(o.suite, o.group)])
                                               / per_replica_epoch(o, o.wall_time_s))
    return out


def wall_shares(obs: Sequence[Observation]) -> Tuple[Dict[str, float], float, int]:
    """``(per-suite shares, share of the other suites, groups matched)``: the factors that put a group
    without a CPU time on the CPU-time scale.  A suite some of whose groups were run again with their
    CPU time measured takes the median of their CPU time / earlier wall time (that corrects both the
    load its records ran under and the code's speed-up since: a per-suite correction, as both differ
    between suites); the other suites take the median of those suites' shares.  Where no group was run
    again: the median CPU / wall time of the measured groups themselves (the load they ran under only);
    1 when no group is measured."""
    ratios = _rerun_ratios(obs)
    if ratios:
        suites = {k: statistics.median(v) for k, v in ratios.items()}
        return suites, statistics.median(suites.values()), sum(len(v) for v in ratios.values())
    own = [o.cpu_time_s / o.wall_time_s for o in obs if o.cpu_time_s is not None]
    return {}, (statistics.median(own) if own else 1.0), 0


def same_but_epochs(o: Observation) -> Tuple[str, int, str]:
    """``(suite, replicas, configuration without its epoch cap)``: what two lengths of one group share."""
    config = json.loads(json.dumps(o.config, default=str))
    (config.get("train") or {}).pop("epochs", None)
    return o.suite, o.replicas, json.dumps(config, sort_keys=True)


def without_setup(measured: Sequence[Observation]) -> List[Observation]:
    """``measured`` with the trained groups that differ only in their epoch cap, run by the same code
    (``commit``) on one machine, taken as each longer one's epochs and times less the shortest's
    (``setup_free``).  A group also pays once what its epochs do not (building the replicas, the first
    touch of its heap, kernels' first calls and one-off checks): seconds that a probe of a few epochs
    divides among them and a run of thousands does not notice (Coauthor CS GAT, 5 replicas, at 78dc8e8:
    4.0 of a 12-epoch probe's 11.4 CPU-s).  The difference of two lengths is the epochs' time alone;
    groups without such a partner are kept as they are."""
    by: Dict[Tuple[str, str, Tuple[str, int, str]], List[Observation]] = {}
    for o in measured:
        by.setdefault((o.commit, o.machine, same_but_epochs(o)), []).append(o)
    out: List[Observation] = []
    for (commit, _, _), group in by.items():
        group = sorted(group, key=lambda o: o.epochs)
        short = group[0]
        if not commit or len(group) < 2 or short.mode != "train":
            out += group
            continue
        longer = [o for o in group[1:] if o.epochs > short.epochs and o.cpu_time_s > short.cpu_time_s]
        out += [replace(o, epochs=o.epochs - short.epochs - 1, cpu_time_s=o.cpu_time_s - short.cpu_time_s,
                        wall_time_s=max(o.wall_time_s - short.wall_time_s, 1e-9), setup_free=True) for o in longer]
        out += [short] if not longer else []
        out += [o for o in group[1:] if o not in longer]
    return out


def time_basis(obs: Sequence[Observation], basis: str = "auto") -> Tuple[List[Observation], TimeBasis]:
    """``obs`` on one time scale.  ``auto``: each group's CPU time where measured, else its wall time x
    :func:`wall_shares` (1 when no group is measured: the fit is then on wall time, as before records
    carried CPU time); a group run again with its CPU time counts once, on it.  ``cpu``: only the groups
    with a CPU time; ``wall``: every group on its wall time.  Measured groups run twice at two lengths
    count once, as their difference (:func:`without_setup`)."""
    if basis not in TIME_BASES:
        raise CostModelError(f"unknown time basis {basis!r}: one of {', '.join(TIME_BASES)}")
    if basis == "wall":
        out = [replace(o, cpu_time_s=None, wall_share=1.0) for o in obs]
        return out, TimeBasis(0, len(out), 1.0)
    measured = without_setup([o for o in obs if o.cpu_time_s is not None])
    if basis == "cpu":
        return measured, TimeBasis(len(measured), 0, 1.0)
    suites, share, matched = wall_shares(obs)
    again = {(o.suite, o.group) for o in measured}
    rest = [replace(o, wall_share=suites.get(o.suite, share)) for o in obs
            if o.cpu_time_s is None and (o.suite, o.group) not in again]
    return measured + rest, TimeBasis(len(measured), len(rest), share, matched, suites)


def design(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]]) -> Tuple[np.ndarray, np.ndarray]:
    """Rows of :data:`TERMS` and targets, both per replica-epoch."""
    xs, ys = [], []
    for o in obs:
        passes = 1.0 if o.mode == "energy_at_init" else o.epochs + 1.0
        xs.append(features(o.config, o.replicas, table, o.mode).vector())
        ys.append(o.seconds / (passes * o.replicas))
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

    A suite's factor is the geometric mean of actual / predicted over its groups whose CPU time was
    measured where it has some, else over all its groups; shrunk toward the unseen-suite factor for
    suites with few such groups (``n / (n + shrink)`` of the log).  The groups without a measured CPU
    time are on their wall time x a share (:func:`time_basis`) that mixes the load they ran under,
    which varied from group to group and sitting to sitting, with the code's speed-up since: they
    shape the coefficients, but the level of a suite is its measured groups' where it has them.
    The unseen-suite factor is the suites' typical factor: the median over suites of each suite's
    mean log ratio as above (one vote per suite: neither one large suite nor one far-off suite sets
    it); over the suites with measured groups alone where there are several (a new suite's groups
    will be measured).  Not 1: the fit minimises ``(predicted / actual - 1)^2``, which costs an
    over-prediction by a factor k more than an under-prediction by the same factor, so with the
    scatter between suites the fitted coefficients predict low and each suite's own factor lifts it."""
    logs: Dict[str, List[float]] = {}
    measured: Dict[str, List[float]] = {}
    for o, r in zip(obs, ratio):
        logs.setdefault(o.suite, []).append(math.log(r))
        if o.cpu_time_s is not None:
            measured.setdefault(o.suite, []).append(math.log(r))
    level = {s: measured.get(s, v) for s, v in logs.items()}
    voters = measured if len(measured) >= MIN_MEASURED_SUITES else level
    prior = statistics.median(sum(v) / len(v) for v in voters.values()) if voters else 0.0
    factors = {s: math.exp((sum(v) + shrink * prior) / (len(v) + shrink)) for s, v in sorted(level.items())}
    return factors, math.exp(prior)


def _dataset(o: Observation) -> str:
    return str(o.config["task"]["dataset"])


def _dataset_factors(obs: Sequence[Observation], ratio: np.ndarray, shrink: float = 2.0) -> Dict[str, float]:
    """``{dataset: factor}``: the geometric mean of actual / predicted (``ratio``, after the suites'
    levels) over the groups with a measured CPU time that trained on the dataset, shrunk toward 1
    (``n / (n + shrink)`` of the log).  The counts price an element or a multiply-add alike on
    every graph, but a graph whose per-layer tensors outgrow the caches (PubMed's 19 717 nodes x the
    replicas) pays more per element, and one with many edges per node (Squirrel, Chameleon) less:
    the same dataset sits low or high in every suite that trains on it (node-wise work counted apart
    from the edges' did not move it).  Groups without a measured
    CPU time carry the load they ran under (:func:`time_basis`) and set none."""
    logs: Dict[str, List[float]] = {}
    for o, r in zip(obs, ratio):
        if o.cpu_time_s is not None:
            logs.setdefault(_dataset(o), []).append(math.log(r))
    return {d: math.exp(sum(v) / (len(v) + shrink)) for d, v in sorted(logs.items())}


def _shape_factors(obs: Sequence[Observation], ratio: np.ndarray, shrink: float = 1.0) -> Dict[str, float]:
    """``{shape_key: factor}``: the geometric mean of actual / predicted (``ratio``, after the suites' and
    datasets' levels) over the groups with a measured CPU time of each shape (:func:`shape_key`), shrunk
    toward 1 (``n / (n + shrink)`` of the log; less than a suite's or a dataset's: a shape's groups are
    alike, and the page's pending shapes have one or two measured groups each).  What the counts miss
    within a suite and a dataset is the shape's own: subnormal numbers past some depth (one graph's deep
    stacks slow two-fold where its shallow ones are not), or a norm's per-head reductions that cost
    unlike the elements counted.  Groups without a measured CPU time set none (:func:`_dataset_factors`)."""
    logs: Dict[str, List[float]] = {}
    for o, r in zip(obs, ratio):
        if o.cpu_time_s is not None:
            logs.setdefault(shape_key(o.config, o.suite), []).append(math.log(r))
    return {k: math.exp(sum(v) / (len(v) + shrink)) for k, v in sorted(logs.items())}


def _levels(trained: Sequence[Observation], ratio: np.ndarray
            ) -> Tuple[Dict[str, float], float, Dict[str, float], np.ndarray]:
    """``(suite factors, unseen-suite factor, dataset factors, each group's suite x dataset level)`` from
    ``ratio`` (actual / the coefficients' prediction): the suites' levels, a dataset's from what they leave,
    then the suites' again without the datasets' share."""
    factors, unseen = _suite_factors(trained, ratio)
    level = np.array([factors.get(o.suite, unseen) for o in trained])
    datasets = _dataset_factors(trained, ratio / level)
    own = np.array([datasets.get(_dataset(o), 1.0) for o in trained])
    factors, unseen = _suite_factors(trained, ratio / own)
    level = np.array([factors.get(o.suite, unseen) for o in trained])
    return factors, unseen, datasets, own * level


def _long_run_factors(obs: Sequence[Observation], ratio: np.ndarray, shrink: float = 1.0) -> Dict[str, float]:
    """``{depth_key: factor}``: per suite and depth, the geometric mean of actual / predicted (``ratio``, after
    the suites' and datasets' levels) over the measured long runs (at least :data:`LONG_RUN_EPOCHS` epochs)
    over the same over the measured short ones (probes) of their own shape (:func:`shape_key`; the depth's
    probes where no long run's shape has any), the long runs' log shrunk by ``n / (n + shrink)``; a depth
    without both has none.  Probes of other shapes may measure newer code than the long runs: compared with
    those, a speed-up would read as lateness.  A probe sees a run's first epochs; a long run of a deep stack may pay
    more per epoch later (as weight decay drives the parameters no gradient pulls on to subnormal numbers:
    nonlocal_accuracy's Cora L = 32 Pre-LN SAN, docs/notes/performance.md), which the levels of the suite,
    dataset and shape, each set by one kind of group or the other, price for neither.  Groups without a
    measured CPU time set none."""
    long: Dict[str, Dict[str, List[float]]] = {}
    short: Dict[str, Dict[str, List[float]]] = {}
    for o, r in zip(obs, ratio):
        if o.cpu_time_s is not None:
            side = long if o.epochs >= LONG_RUN_EPOCHS else short
            side.setdefault(depth_key(o.config, o.suite), {}).setdefault(shape_key(o.config, o.suite), []).append(
                math.log(r))
    out: Dict[str, float] = {}
    for depth, shapes in sorted(long.items()):
        probes = short.get(depth, {})
        # a long run against its own shape's probes where it has them: another shape's probes may
        # measure newer (faster) code than the long runs, which a depth-wide mean would price as lateness
        paired = [(v, probes[k]) for k, v in shapes.items() if k in probes]
        if not paired and probes:
            paired = [(sum(shapes.values(), []), sum(probes.values(), []))]
        if paired:
            n = sum(len(v) for v, _ in paired)
            late = sum(len(v) * (statistics.mean(v) - statistics.mean(p)) for v, p in paired) / n
            out[depth] = math.exp(late * n / (n + shrink))
    return out


def fit(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]], per_suite: bool = True,
        device: str = "cpu", fitted_on: str = "") -> CostModel:
    """Fit the coefficients (and per-suite factors, with the factor of a suite the records lack:
    :func:`_suite_factors`) on the trained groups of ``obs``, and one factor per other mode (energy
    at initialisation) on the rest."""
    trained = [o for o in obs if o.mode == "train"]
    if len(trained) < MIN_TRAINED_GROUPS:
        raise CostModelError(f"calibration needs at least {MIN_TRAINED_GROUPS} finished trained groups, got {len(trained)}")
    x, y = design(trained, table)
    coef = nnls_relative(x, y)
    pred = np.maximum(x @ coef, 1e-12)
    factors, unseen = _suite_factors(trained, y / pred) if per_suite else ({}, 1.0)
    datasets: Dict[str, float] = {}
    shapes: Dict[str, float] = {}
    late: Dict[str, float] = {}
    if per_suite:  # the levels (suite, dataset) of the groups' first epochs' rate, a long run's factor over
        # it from what they leave, the levels again without the long runs' share, then each shape's
        factors, unseen, datasets, levels = _levels(trained, y / pred)
        late = _long_run_factors(trained, y / (pred * levels))
        model = CostModel({}, {}, long_run_factors=late)
        lengths = np.array([model.long_run_factor(o.config, o.suite, o.epochs) for o in trained])
        factors, unseen, datasets, levels = _levels(trained, y / (pred * lengths))
        shapes = _shape_factors(trained, y / (pred * levels * lengths))
    modes: Dict[str, List[float]] = {}
    for o in obs:
        if o.mode != "train":
            xo, yo = design([o], table)
            modes.setdefault(o.mode, []).append(math.log(yo[0] / max(float(xo[0] @ coef), 1e-12)))
    return CostModel({t: float(c) for t, c in zip(TERMS, coef)}, factors, device, fitted_on,
                     {m: math.exp(sum(v) / len(v)) for m, v in sorted(modes.items())}, unseen_suite_factor=unseen,
                     dataset_factors=datasets, shape_factors=shapes, long_run_factors=late)


@dataclass
class FitQuality:
    """Leave-one-out errors of group time (``quantity``: what was predicted, :meth:`TimeBasis.quantity`):
    median and 90th percentile of the factor ``max(pred/actual, actual/pred)``, and R^2 of log time."""

    groups: int
    median_factor: float
    p90_factor: float
    r2_log: float
    unit: str = "groups"   # what a point is: a group, or a suite (leave_one_suite_out)
    quantity: str = "wall time"

    def describe(self) -> str:
        return (f"{self.groups} {self.unit}: median error x{self.median_factor:.2f}, 90th percentile "
                f"x{self.p90_factor:.2f}, R^2 (log {self.quantity}) {self.r2_log:.2f}")


def quantity(obs: Sequence[Observation]) -> str:
    """What ``obs``'s times are (:meth:`TimeBasis.quantity` of them)."""
    cpu = sum(o.cpu_time_s is not None for o in obs)
    return TimeBasis(cpu, len(obs) - cpu, 1.0).quantity()


def quality(actual: Sequence[float], predicted: Sequence[float], unit: str = "groups",
            quantity: str = "wall time") -> FitQuality:
    la = np.log(np.asarray(actual, dtype=float))
    lp = np.log(np.maximum(np.asarray(predicted, dtype=float), 1e-12))
    factor = np.exp(np.abs(la - lp))
    ss_res = float(((la - lp) ** 2).sum())
    ss_tot = float(((la - la.mean()) ** 2).sum())
    return FitQuality(len(la), float(np.median(factor)), float(np.quantile(factor, 0.9)),
                      1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"), unit, quantity)


def leave_one_out_predictions(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]],
                              per_suite: bool = True) -> List[float]:
    """Each group's time predicted by a model fitted on all the others."""
    predicted = []
    for i, o in enumerate(obs):
        model = fit([p for j, p in enumerate(obs) if j != i], table, per_suite)
        epochs = 0 if o.mode == "energy_at_init" else o.epochs
        predicted.append(model.group_seconds([o.config] * o.replicas, epochs, table, o.mode, o.suite))
    return predicted


def leave_one_out(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]],
                  per_suite: bool = True) -> FitQuality:
    """Each group's time (:attr:`Observation.seconds`) predicted by a model fitted on all the others."""
    return quality([o.seconds for o in obs], leave_one_out_predictions(obs, table, per_suite), quantity=quantity(obs))


def measured_only(obs: Sequence[Observation], predicted: Sequence[float]) -> Optional[FitQuality]:
    """The leave-one-out error on the groups whose CPU time was measured alone (their own time, no
    wall-time correction in it), where the fit also holds groups without one; else ``None``."""
    pairs = [(o.seconds, p) for o, p in zip(obs, predicted) if o.cpu_time_s is not None]
    if len(pairs) < 2 or len(pairs) == len(obs):
        return None
    return quality([a for a, _ in pairs], [p for _, p in pairs], quantity="measured CPU time")


def leave_one_suite_out(obs: Sequence[Observation], table: Mapping[str, Mapping[str, Any]],
                        per_suite: bool = True) -> FitQuality:
    """Each suite predicted by a model fitted on the other suites' records, as if it had none yet
    (its groups get the unseen-suite factor); one point per suite (the geometric means of its
    groups' actual and predicted times), so the error is that of a new suite's estimate, whatever
    its size."""
    predicted, actual = [], []
    for suite in sorted({o.suite for o in obs}):
        model = fit([o for o in obs if o.suite != suite], table, per_suite)
        logs = [(math.log(o.seconds), math.log(max(model.group_seconds(
                    [o.config] * o.replicas, 0 if o.mode == "energy_at_init" else o.epochs, table, o.mode, o.suite),
                    1e-12))) for o in obs if o.suite == suite]
        actual.append(math.exp(sum(a for a, _ in logs) / len(logs)))
        predicted.append(math.exp(sum(p for _, p in logs) / len(logs)))
    return quality(actual, predicted, "suites", quantity(obs))


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
    the scale is the geometric mean of time / cost over the other groups."""
    logs = [math.log(o.seconds / max(c, 1e-12)) for o, c in zip(obs, cost)]
    total = sum(logs)
    predicted = [c * math.exp((total - lg) / (len(logs) - 1)) for c, lg in zip(cost, logs)]
    return quality([o.seconds for o in obs], predicted, quantity=quantity(obs))
