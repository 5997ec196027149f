"""The comparison of our runs with a paper's number (zoo/bench/report/agreement.py): the 95 %
interval of ours − paper against an equivalence margin, and the runs that would decide a noisy cell."""
from __future__ import annotations

import math
import random

import pytest
from scipy import stats as sps

from zoo.bench.report import agreement as ag

PTS = ag.MARGINS["points"]


def _paper(value, runs=5, **spread):
    return ag.paper_number({"value": value, **spread}, runs, geometric=False)


def test_the_papers_spread_is_read_from_what_it_stores():
    ci = _paper(60.0, ci95=2.776)  # t(0.975, 4) = 2.776: a CI of 2.776 over 5 runs is an sd of sqrt(5)
    assert ci.sd == pytest.approx(math.sqrt(5), rel=1e-3) and ci.runs == 5
    assert _paper(60.0, std=1.5).sd == 1.5
    assert _paper(60.0, spread=1.5).sd == 1.5 and "widest" in _paper(60.0, spread=1.5).basis
    assert _paper(60.0).sd is None and _paper(60.0, runs=None).runs == 1  # none stored; runs not stated: one
    assert ag.paper_number({"value": 0.0}, None, geometric=True) is None  # an energy <= 0: not comparable
    assert ag.paper_number({"value": 1e-3}, None, geometric=True).value == pytest.approx(-3.0)


def test_welch_interval_matches_scipy():
    ours = [60.0, 62.0, 61.0, 59.5, 63.0]
    paper = _paper(58.0, std=2.0)  # 5 runs, sd 2
    a = ag.compare(ours, paper, PTS)
    theirs = [58.0 + 2.0 * z for z in (-1.2649, -0.6325, 0.0, 0.6325, 1.2649)]  # 5 values, mean 58, sd 2
    res = sps.ttest_ind(ours, theirs, equal_var=False)
    ci = res.confidence_interval(0.95)
    assert (a.low, a.high) == pytest.approx((ci.low, ci.high), abs=2e-3)


def test_a_one_run_paper_number_gets_the_prediction_interval():
    ours = [80.0, 81.0, 82.0, 83.0, 84.0]  # mean 82, sd 1.58
    a = ag.compare(ours, _paper(82.0, runs=None), PTS)
    s = sps.tstd(ours)
    half = sps.t.ppf(0.975, 4) * s * math.sqrt(1 + 1 / 5)
    assert (a.low, a.high) == pytest.approx((-half, half))


def test_outcomes_against_the_margin():
    tight = [60.0, 60.1, 59.9, 60.05, 59.95]
    assert ag.compare(tight, _paper(61.0, std=0.1), PTS).outcome == ag.REPRODUCED  # differs from 0, within margin
    assert ag.compare(tight, _paper(70.0, std=0.1), PTS).outcome == ag.DIFFERS
    wide = [40.0, 60.0, 80.0, 50.0, 70.0]
    noisy = ag.compare(wide, _paper(61.0, std=0.1), PTS)
    assert noisy.outcome == ag.NOISY and noisy.low < -PTS and noisy.high > PTS


def test_a_wide_interval_reproduces_nothing():
    """Regression: balance_table2 Texas Xavier L = 40, 15.14 ± 31.53 vs 17.84 ± 26.98 (two of five
    runs at 0 %) was *reproduced* because the paper's value lay inside our CI."""
    a = ag.compare([13.5, 0.0, 0.0, 59.5, 2.7], _paper(17.84, ci95=26.98), PTS)
    assert a.outcome == ag.NOISY and a.seeds is None  # the paper's own ± alone exceeds any margin


def test_no_reproduced_interval_is_wider_than_the_margin():
    rng = random.Random(0)
    for _ in range(400):
        n = rng.randint(2, 10)
        ours = [rng.gauss(60, rng.choice([0.2, 1, 3, 10])) for _ in range(n)]
        spread = rng.choice([{}, {"std": rng.uniform(0, 5)}, {"ci95": rng.uniform(0.1, 5)}])
        a = ag.compare(ours, _paper(rng.gauss(60, 2), runs=rng.choice([None, 5]), **spread), PTS)
        if a.outcome == ag.REPRODUCED:
            assert a.half_width <= PTS + 1e-9 and -PTS - 1e-9 <= a.low and a.high <= PTS + 1e-9


def test_two_runs_close_to_the_paper_are_not_reproduced():
    """Regression: the page said the |Δ| <= 1 fallback applies at n = 1, the code applied it below
    three runs: two runs 21 points apart with a mean 0.9 from the paper were *reproduced*."""
    a = ag.compare([32.9, 11.7], _paper(22.3 + 0.9, runs=None), PTS)
    assert a.outcome == ag.NOISY
    one = ag.compare([50.0], _paper(50.5, ci95=1.0), PTS)  # one run: no spread of ours, nothing decided
    assert one.outcome == ag.NOISY and one.runs == 1 and one.seeds == 2


def test_seeds_to_decide_is_where_the_interval_decides():
    values = [60.0, 63.0, 57.0, 61.0, 59.0]  # mean 60, sd 2.24; paper 60.5 with a small sd: within reach
    paper = _paper(60.5, std=0.5)
    a = ag.compare(values, paper, PTS)
    assert a.outcome == ag.NOISY and a.seeds is not None and a.seeds > 5
    mean, sd = 60.0, sps.tstd(values)
    assert ag.outcome(*ag._interval(mean, sd, a.seeds, paper), PTS) != ag.NOISY
    assert ag.outcome(*ag._interval(mean, sd, a.seeds - 1, paper), PTS) == ag.NOISY


def test_energies_compare_in_decades():
    decades = ag.MARGINS["decades"]
    logs = [-3.1, -2.9, -3.0, -3.05, -2.95]  # log10 of the energies
    near = ag.paper_number({"value": 10 ** -3.2}, None, geometric=True)
    far = ag.paper_number({"value": 10 ** -1.0}, None, geometric=True)
    assert ag.compare(logs, near, decades).outcome == ag.REPRODUCED
    assert ag.compare(logs, far, decades).outcome == ag.DIFFERS


def test_signed_has_no_negative_zero():
    assert ag.signed(-0.001) == "+0.00" and ag.signed(-0.01) == "-0.01" and ag.signed(1.234) == "+1.23"
