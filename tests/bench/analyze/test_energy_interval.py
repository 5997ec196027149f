"""Energy cells print the interval that decides their status: the 95 % CI of the
geometric mean, beside the [min … max] range, so every status can be checked from the page."""
from __future__ import annotations

import math

from zoo.bench.analyze import board as lb
from zoo.bench.analyze.stats import summarize_log


def test_energy_cell_prints_the_ci_of_the_geometric_mean():
    s = summarize_log([1e-5, 1e-3, 1e-4])
    text = lb.fmt(s)
    assert "[1.0e-05 … 1.0e-03] (3)" in text  # the range, as before
    lo, hi = s.mean / 10 ** s.ci95, s.mean * 10 ** s.ci95
    assert f"95 % CI {lo:.1e} … {hi:.1e}" in text
    assert math.isclose(math.log10(hi) - math.log10(s.mean), s.ci95)


def test_one_energy_run_has_no_interval():
    assert "CI" not in lb.fmt(summarize_log([2e-3]))
