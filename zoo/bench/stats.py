"""Aggregates over runs: mean, sample standard deviation and a Student-t 95% confidence interval.

The papers write ``mean +- 95% CI`` over five runs; the half-width is
``t_{0.975, n-1} * s / sqrt(n)`` with ``s`` the sample (``n - 1``) standard deviation.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, Optional


def t_quantile(p: float, dof: int) -> float:
    """Quantile ``p`` of Student's t with ``dof`` degrees of freedom (scipy if present, else bisection)."""
    if dof < 1:
        raise ValueError(f"Student t needs dof >= 1, got {dof}")
    try:
        from scipy.stats import t  # type: ignore

        return float(t.ppf(p, dof))
    except ImportError:  # pragma: no cover - scipy is a dependency of scikit-learn
        lo, hi = 0.0, 1e3
        for _ in range(200):
            mid = (lo + hi) / 2
            # regularised incomplete beta via the t CDF is heavy; integrate the density instead
            if _t_cdf(mid, dof) < p:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2


def _t_cdf(x: float, dof: int, steps: int = 20000) -> float:  # pragma: no cover - fallback only
    c = math.gamma((dof + 1) / 2) / (math.sqrt(dof * math.pi) * math.gamma(dof / 2))
    h = x / steps
    s = sum(c * (1 + ((i + 0.5) * h) ** 2 / dof) ** (-(dof + 1) / 2) for i in range(steps)) * h
    return 0.5 + s


@dataclass(frozen=True)
class Summary:
    """``n`` finite values summarised; ``std``/``ci95`` are ``None`` for ``n < 2``."""

    n: int
    mean: Optional[float]
    std: Optional[float]
    ci95: Optional[float]

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
