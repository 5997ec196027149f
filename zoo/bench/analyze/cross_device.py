r"""Records of the same cell made on different devices: do they differ beyond float rounding?

Two devices round differently (other kernels, other summation orders), and training amplifies a
rounding difference: where two runs' trajectories are still the same run, their selected epoch is
the same and their numbers agree to rounding; where a near-tie (a validation score, a stopping
test) went the other way, the runs part and become two draws of the same training — which is no
defect, but must not move a cell systematically.  The rule, per pair of records with one cell id
(same configuration, seed and initialisation) on two device kinds:

* **same trajectory** (``epochs_to_best`` equal): the test metric agrees within one test node
  (accuracy: ``1 / n_test``, ``n_test`` read off the recorded accuracies' common denominator;
  another metric, or accuracies that are no exact ``k / n``: :data:`METRIC_RTOL` relative) and the validation loss within :data:`LOSS_RTOL`
  relative.  Otherwise the pair is **flagged**: same epoch, different numbers is no rounding.
* **parted** (``epochs_to_best`` differs): counted, not flagged on its own.

and per cell (the pairs sharing a configuration but for the seed: one paper cell's runs) the
**paired test-metric difference** (``other - reference`` device) must be consistent with zero:
``|mean d| <= t * sd(d) / sqrt(n)`` (a paired t-test at 1 %, two-sided: ``t`` is Student's 0.995
quantile with ``n - 1`` degrees of freedom, :func:`t_critical`), and where every run moved by the
same amount (``sd(d) = 0``) the shift must be at most one test node.  A cell that fails is **flagged**: one device moves its result.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from zoo.bench.plan.calibration import device_kind
from zoo.bench.store.records import read_records

#: relative tolerance of the validation loss of two records at the same selected epoch: float32
#: rounding over up to thousands of epochs (the H200 vs CPU Cornell records: at most 9e-4)
LOSS_RTOL = 1e-2
#: relative tolerance of a test metric that is not a share of nodes (ROC-AUC, ...)
METRIC_RTOL = 1e-3
#: Student's t, 0.995 quantile, by degrees of freedom (a degree between two keys takes the lower key's:
#: conservative); the normal quantile beyond the last
T_995 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355, 9: 3.250, 10: 3.169,
         12: 3.055, 15: 2.947, 20: 2.845, 30: 2.750, 60: 2.660, 120: 2.617}
Z_995 = 2.576
#: the largest test set whose accuracies are read as ``k / n_test`` (a float64 ``k / n`` is exact: a
#: random float matches no such fraction)
MAX_TEST_NODES = 100_000


def test_nodes(values: Iterable[float]) -> Optional[int]:
    """The test set's size as the accuracies' common denominator (``15/37`` -> 37), None if unknown."""
    n = 1
    for v in values:
        frac = Fraction(float(v)).limit_denominator(MAX_TEST_NODES)
        if float(frac) != float(v):  # k / n in float64 exactly: any other float is no share of nodes
            return None
        n = n * frac.denominator // math.gcd(n, frac.denominator)
        if n > MAX_TEST_NODES:
            return None
    return n if n > 1 else None


@dataclass
class Pair:
    """One cell id with a record on each of two device kinds."""

    id: str
    reference: Mapping[str, Any]
    other: Mapping[str, Any]
    tolerance: float            # the test metric's allowed difference on the same trajectory
    problem: str = ""           # why the pair is flagged ("" = not)

    @property
    def difference(self) -> float:
        return float(self.other["metrics"]["test"]) - float(self.reference["metrics"]["test"])

    @property
    def same_trajectory(self) -> bool:
        return self.reference.get("epochs_to_best") == self.other.get("epochs_to_best")

    @property
    def equal(self) -> bool:
        return self.difference == 0.0


@dataclass
class CellComparison:
    """The pairs of one configuration (all seeds and initialisations of one cell)."""

    key: str
    pairs: List[Pair] = field(default_factory=list)
    problem: str = ""

    @property
    def flagged(self) -> bool:
        return bool(self.problem) or any(p.problem for p in self.pairs)


def t_critical(df: int) -> float:
    """Student's t 0.995 quantile for ``df`` degrees of freedom (:data:`T_995`, rounded down in ``df``)."""
    if df > max(T_995):
        return Z_995
    return T_995[max(k for k in T_995 if k <= df)]


def cell_key(record: Mapping[str, Any]) -> str:
    """The configuration without the seed: the runs one paper cell averages."""
    config = json.loads(json.dumps(record["config"]))
    config.get("run", {}).pop("seed", None)
    return f"{record.get('suite', '')} {json.dumps(config, sort_keys=True)}"


def _tolerance(metric: str, values: Sequence[float]) -> float:
    n = test_nodes(values) if metric == "accuracy" else None
    if n is not None:
        return 1.0 / n + 1e-12
    return METRIC_RTOL * max(abs(v) for v in values) if values else 0.0


def _pair_problem(p: Pair) -> str:
    if not p.same_trajectory:
        return ""
    if abs(p.difference) > p.tolerance:
        return (f"same selected epoch ({p.reference.get('epochs_to_best')}), test metric "
                f"{p.reference['metrics']['test']:.4f} vs {p.other['metrics']['test']:.4f}")
    a, b = p.reference.get("val_loss"), p.other.get("val_loss")
    if a is not None and b is not None and abs(float(a) - float(b)) > LOSS_RTOL * max(abs(float(a)), 1e-12):
        return f"same selected epoch ({p.reference.get('epochs_to_best')}), validation loss {a:.6g} vs {b:.6g}"
    return ""


def _cell_problem(pairs: Sequence[Pair]) -> str:
    d = [p.difference for p in pairs]
    mean = statistics.fmean(d)
    if len(d) < 2 or mean == 0.0:
        return ""
    sd = statistics.stdev(d)
    if sd == 0.0:
        return "" if abs(mean) <= pairs[0].tolerance else f"every run moved by {mean:+.4f}"
    t = mean / (sd / math.sqrt(len(d)))
    crit = t_critical(len(d) - 1)
    return f"mean test difference {mean:+.4f} over {len(d)} runs (|t| = {abs(t):.1f} > {crit})" if abs(t) > crit else ""


def compare(reference: Iterable[Mapping[str, Any]], other: Iterable[Mapping[str, Any]]) -> List[CellComparison]:
    """Pairs of finished records with one cell id in ``reference`` and ``other`` made on different
    device kinds, grouped by cell, each pair and cell judged by the module's rule."""
    ref = {r["id"]: r for r in reference if r.get("status", "ok") == "ok" and r.get("metrics")}
    cells: Dict[str, CellComparison] = {}
    for r in other:
        base = ref.get(r.get("id"))
        if base is None or r.get("status", "ok") != "ok" or device_kind(base) == device_kind(r):
            continue
        key = cell_key(base)
        cells.setdefault(key, CellComparison(key)).pairs.append(Pair(r["id"], base, r, 0.0))
    for c in cells.values():
        metric = str(c.pairs[0].reference.get("metric", ""))
        tol = _tolerance(metric, [float(x["metrics"]["test"]) for p in c.pairs for x in (p.reference, p.other)])
        for p in c.pairs:
            p.tolerance = tol
            p.problem = _pair_problem(p)
        c.problem = _cell_problem(c.pairs)
    return sorted(cells.values(), key=lambda c: c.key)


def summary(cells: Sequence[CellComparison]) -> str:
    """One line: pairs, equal test metric, same trajectory, flagged pairs and cells."""
    pairs = [p for c in cells for p in c.pairs]
    flagged = [c for c in cells if c.flagged]
    return (f"{len(pairs)} runs on two devices in {len(cells)} cells: test metric equal in "
            f"{sum(p.equal for p in pairs)}, same selected epoch in {sum(p.same_trajectory for p in pairs)}; "
            f"flagged: {sum(bool(p.problem) for p in pairs)} runs, {len(flagged)} cells")


def _label(c: CellComparison) -> str:
    cfg = c.pairs[0].reference["config"]
    kw = cfg.get("model", {}).get("kwargs", {})
    return f"{c.pairs[0].reference.get('suite', '')} {cfg['task']['dataset']} {cfg['model']['name']} " \
           f"L={kw.get('num_layers', '?')} init={cfg['model'].get('init', '?')}"


def report_lines(cells: Sequence[CellComparison]) -> List[str]:
    """:func:`summary`, then per cell its runs, equal / parted counts, mean difference and any flag."""
    lines = [summary(cells)]
    for c in cells:
        d = [p.difference for p in c.pairs]
        lines.append(f"  {_label(c)}: {len(d)} runs, equal {sum(p.equal for p in c.pairs)}, parted "
                     f"{sum(not p.same_trajectory for p in c.pairs)}, mean difference {statistics.fmean(d):+.4f}"
                     + (f" -- FLAGGED: {c.problem}" if c.problem else ""))
        lines += [f"    run {p.id}: FLAGGED: {p.problem}" for p in c.pairs if p.problem]
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m zoo.bench.analyze.cross_device REFERENCE OTHER``: two results folders (or files);
    exit 1 when a run or a cell is flagged."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reference", help="results folder or results.jsonl (e.g. the committed CPU records)")
    p.add_argument("other", help="results folder or results.jsonl made on another device")
    args = p.parse_args(argv)
    cells = compare(read_records(args.reference), read_records(args.other))
    print("\n".join(report_lines(cells)))
    return 1 if any(c.flagged for c in cells) else 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CellComparison", "Pair", "compare", "summary", "report_lines", "test_nodes", "t_critical", "LOSS_RTOL",
           "METRIC_RTOL"]
