"""Aggregates over runs: mean, sample standard deviation and a Student-t 95% confidence interval.

The papers write ``mean +- 95% CI`` over five runs; the half-width is
``t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample (``n - 1``) standard deviation.

Energies (Laplacian / Dirichlet) are log-normal across seeds — at L = 32 one seed gives 6.5e-7 and
another 1.3e-2 — so their arithmetic mean is dominated by one run and a t-interval around it is
meaningless.  :func:`summarize_log` gives the geometric mean (the mean in log10), the median and
the min–max range instead; comparisons are made in log10.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, Optional

from scipy.special import stdtrit  # what scipy.stats.t.ppf calls; scipy.stats costs ~1 s to import


def t_quantile(p: float, dof: int) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (``scipy.stats.t.ppf``, which is
    ``scipy.special.stdtrit``)."""
    if dof < 1:
        raise ValueError(f"Student t needs dof >= 1, got {dof}")
    return float(stdtrit(dof, p))


@dataclass(frozen=True)
class Summary:
    """``n`` finite values summarised; ``std``/``ci95`` are ``None`` for ``n < 2``."""

    n: int
    mean: Optional[float]
    std: Optional[float]
    ci95: Optional[float]
    #: ``"arithmetic"`` (mean, sample std, t-CI) or ``"geometric"`` (``mean`` = 10**mean(log10 x);
    #: ``std``/``ci95`` in decades, i.e. of log10 x; ``low``/``high`` = min/max; ``median``).
    kind: str = "arithmetic"
    low: Optional[float] = None
    high: Optional[float] = None
    median: Optional[float] = None

    def as_dict(self) -> Dict[str, Optional[float]]:
        return asdict(self)


def summarize(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Mean, sample std (``ddof=1``) and the Student-t ``confidence`` half-width of ``values``."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None)
    mean = sum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, half)


def summarize_log(values: Iterable[float], confidence: float = 0.95) -> Summary:
    """Geometric summary of positive values: geometric mean, median, min, max, and the std and
    t-CI half-width of ``log10 x`` (in decades).  Non-positive or non-finite values are dropped
    (an energy of exactly 0 is an underflow: run such cells in float64)."""
    xs = sorted(float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0)
    if not xs:
        return Summary(0, None, None, None, kind="geometric")
    logs = summarize(math.log10(x) for x in xs)
    n = len(xs)
    median = xs[n // 2] if n % 2 else math.sqrt(xs[n // 2 - 1] * xs[n // 2])
    return Summary(n, 10 ** logs.mean, logs.std, logs.ci95, kind="geometric", low=xs[0], high=xs[-1], median=median)
