"""Student-t quantiles: the tabled 0.975 quantiles are scipy's, bit for bit, and a leaderboard's
95 % intervals need no scipy import."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
from scipy.special import stdtrit

from zoo.bench.analyze.stats import T975, summarize, t_quantile


def test_every_tabled_quantile_is_scipys() -> None:
    for dof, value in enumerate(T975, start=1):
        assert value == float(stdtrit(dof, 0.975)), dof


@pytest.mark.parametrize("p, dof", [(0.975, 1), (0.975, 100), (0.975, 101), (0.975, 4.0), (0.975, 4.5),
                                    (0.95, 4), (0.995, 9), (0.975, 250)])
def test_quantile_equals_scipy_everywhere(p: float, dof: float) -> None:
    assert t_quantile(p, dof) == float(stdtrit(dof, p))


def test_nan_dof_is_scipys_nan() -> None:
    assert math.isnan(t_quantile(0.975, float("nan")))


def test_bad_dof() -> None:
    with pytest.raises(ValueError):
        t_quantile(0.975, 0)


def test_interval_of_five_runs() -> None:
    values = [51.2, 48.9, 55.0, 50.1, 49.7]
    s = summarize(values)
    assert s.ci95 == float(stdtrit(4, 0.975)) * s.std / math.sqrt(5)


def test_a_leaderboard_interval_imports_no_scipy() -> None:
    code = ("import sys; from zoo.bench.analyze.stats import summarize; summarize([1.0, 2.0, 4.0]); "
            "print(any(m == 'scipy' or m.startswith('scipy.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
