"""Whether our runs agree with a paper's number: an equivalence test against a stated margin.

A paper number is the mean of ``n`` runs of the paper's protocol (``n = 1``: one draw).  Ours is
the mean of our ``m`` runs.  The question is whether the two protocols have the same expected
value, to within a margin a reader would accept (:data:`MARGINS`).  We estimate the difference
``δ = ours − paper`` and its 95 % interval (Welch 1947; the Welch–Satterthwaite degrees of
freedom), reading the paper's spread where it is stored:

* ``ci95`` over ``n`` runs — the paper's run-to-run sd is ``ci95 · √n / t(0.975, n − 1)`` (over an
  unstated number: its standard error read as ``ci95 / 1.96``, the widest reading);
* ``std`` — its sd;
* ``spread`` (a ± the paper does not name) — read as an sd, the widest of the readings a ± can
  have (sd, CI half-width, standard error): what it cannot tell is not counted as agreement;
* nothing stored — the paper's runs are assumed to spread as ours do (both are draws of the same
  protocol if the paper is reproduced), and only our runs estimate that spread; with ``n = 1``
  the interval of ``δ`` is then the prediction interval of one new draw (``√(1/m + 1)``).

The outcome (Schuirmann 1987's two one-sided tests, reported as one interval; Lakens, Scheel &
Isager 2018 for the reading of the four cases):

* *reproduced* — the whole interval lies within ``± margin``: the data show agreement within
  the margin (even where it also excludes 0: a difference smaller than the margin);
* *differs* — the interval excludes 0 and does not lie within the margin;
* *consistent, too noisy to tell* — it contains 0 but reaches past the margin; :func:`seeds_to_decide`
  says how many runs of ours would decide it at the current mean and spread (none may: a paper
  number whose own uncertainty alone is wider than the margin can never be shown to agree).

Energies are compared in log10 (decades), accuracies in points.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from zoo.bench.analyze.stats import t_quantile

REPRODUCED, NOISY, DIFFERS = "reproduced", "consistent, too noisy to tell", "differs"

#: The equivalence margin per metric kind, in the comparison's unit.
#: Accuracy (and every other percentage metric): 3 points.  One test node of the coarsest test
#: sets compared (Cornell, Texas: 37 nodes) is 2.7 points, so a tighter margin would call a reading
#: one node away "not shown"; and the papers' claims that the suites check rest on gaps of 5 to 70
#: points (balanced vs Xavier inits at depth, LipschitzNorm vs none at 15-30 layers), so agreement
#: within 3 points cannot hide one.
#: Energies (log-normal over seeds): 0.5 decade (a factor √10 ≈ 3.2).  The nonlocal paper's
#: claims are growth or decay over depth by 1 to 12 decades; seed-to-seed spread at init is
#: 0.3-2 decades at depth >= 32.
MARGINS = {"points": 3.0, "decades": 0.5}
#: runs of ours beyond which :func:`seeds_to_decide` stops looking (more is not a plan)
MAX_RUNS = 1000
_EPS = 1e-9  # the papers' numbers are rounded decimals: a boundary value counts as inside


def margin_unit(geometric: bool) -> str:
    return "decades" if geometric else "points"


@dataclass(frozen=True)
class PaperNumber:
    """A paper's number on the comparison scale: its ``value``, its runs' sd (``None``: not
    stored, assumed equal to ours), the ``runs`` behind it, and how that was read (``basis``)."""

    value: float
    sd: Optional[float]
    runs: int
    basis: str


def paper_number(reported: Mapping[str, object], runs: Optional[int], geometric: bool) -> Optional[PaperNumber]:
    """Read a stored paper entry (``value`` and ``ci95`` / ``std`` / ``spread``) given the runs the
    paper states behind its numbers (``None``: not stated, read as one run: the widest reading).
    ``None`` for a value that cannot be compared (an energy <= 0)."""
    value = float(reported["value"])  # type: ignore[arg-type]
    if geometric:
        if value <= 0:
            return None
        value = math.log10(value)
    n = int(runs) if runs else 1
    stated = f"{n} runs" if runs else "one run (the paper does not say how many)"
    if geometric or all(reported.get(k) is None for k in ("ci95", "std", "spread")):
        return PaperNumber(value, None, n, f"mean of {stated}, no spread stored: its sd taken as ours"
                           if n > 1 else f"{stated}: a prediction interval (its sd taken as ours)")
    if reported.get("ci95") is not None:
        ci = float(reported["ci95"])  # type: ignore[arg-type]
        if n < 2:  # over an unstated number of runs: its standard error is at most ci / 1.96
            return PaperNumber(value, ci / 1.959964, 1, "mean ± 95 % CI of an unstated number of runs "
                                                        "(standard error ci / 1.96, the widest reading)")
        sd = ci * math.sqrt(n) / t_quantile(0.975, n - 1)
        return PaperNumber(value, sd, n, f"mean ± 95 % CI of {n} runs (sd {sd:.2f})")
    if reported.get("std") is not None:
        return PaperNumber(value, float(reported["std"]), n, f"mean ± sd of {stated}")  # type: ignore[arg-type]
    return PaperNumber(value, float(reported["spread"]), n,  # type: ignore[arg-type]
                       f"mean of {stated}, its unnamed ± read as an sd (the widest reading)")


@dataclass(frozen=True)
class Agreement:
    """The comparison of one cell: ``delta`` = ours − paper with its 95 % interval, the outcome,
    and for a cell too noisy to tell the runs of ours that would decide it (``None``: none would)."""

    outcome: str
    delta: float
    low: float
    high: float
    margin: float
    runs: int
    seeds: Optional[int] = None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def interval_text(self) -> str:
        """``[-2.76, +0.59]`` (``""`` where there is no interval: fewer than two runs, no finite value)."""
        if self.runs < 2 or not math.isfinite(self.low):
            return ""
        return f"[{signed(self.low)}, {signed(self.high)}]"


def signed(x: float) -> str:
    """``+1.20`` / ``-0.35``; a value that rounds to zero prints ``+0.00`` (no ``-0.00``)."""
    text = f"{x:+.2f}"
    return "+0.00" if text == "-0.00" else text


def _interval(mean: float, sd: float, n: int, paper: PaperNumber) -> tuple:
    """(low, high) of the 95 % interval of ours − paper with ``n`` runs of ours (sd ``sd``)."""
    ours_var = sd * sd / n
    if paper.sd is None:  # the paper's runs spread as ours: only our runs estimate it
        se, dof = math.sqrt(ours_var + sd * sd / paper.runs), n - 1
    else:
        theirs_var = paper.sd * paper.sd / paper.runs
        se = math.sqrt(ours_var + theirs_var)
        denom = ours_var ** 2 / (n - 1) + (theirs_var ** 2 / (paper.runs - 1) if paper.runs > 1 else 0.0)
        dof = (ours_var + theirs_var) ** 2 / denom if denom > 0 else n - 1
    half = 0.0 if se == 0 else t_quantile(0.975, max(dof, 1)) * se
    delta = mean - paper.value
    return delta - half, delta + half


def outcome(low: float, high: float, margin: float) -> str:
    if low >= -margin - _EPS and high <= margin + _EPS:
        return REPRODUCED
    if low > _EPS or high < -_EPS:
        return DIFFERS
    return NOISY


def compare(values: Sequence[float], paper: PaperNumber, margin: float) -> Agreement:
    """Our runs' ``values`` (on the comparison scale: log10 for energies) against ``paper``.
    Fewer than two runs of ours: no spread of ours, so nothing is decided (*too noisy to tell*)."""
    xs = [float(v) for v in values]
    n = len(xs)
    mean = sum(xs) / n if n else math.nan
    if n < 2:
        return Agreement(NOISY, mean - paper.value, -math.inf, math.inf, margin, n, None if n == 0 else 2)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    low, high = _interval(mean, sd, n, paper)
    result = outcome(low, high, margin)
    seeds = seeds_to_decide(mean, sd, n, paper, margin) if result == NOISY else None
    return Agreement(result, mean - paper.value, low, high, margin, n, seeds)


def seeds_to_decide(mean: float, sd: float, n: int, paper: PaperNumber, margin: float) -> Optional[int]:
    """The fewest runs of ours (more than ``n``) whose interval would be decided (within the margin,
    or excluding 0) if the mean and sd stayed as they are; ``None``: no number up to
    :data:`MAX_RUNS` would (the paper's own uncertainty is too wide for the margin)."""
    lo, hi = n + 1, MAX_RUNS
    if outcome(*_interval(mean, sd, hi, paper), margin) == NOISY:
        return None
    while lo < hi:  # the interval narrows as runs are added: bisect on the first decided count
        mid = (lo + hi) // 2
        if outcome(*_interval(mean, sd, mid, paper), margin) == NOISY:
            lo = mid + 1
        else:
            hi = mid
    return lo
