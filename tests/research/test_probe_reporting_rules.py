"""research/probe_reporting_rules.py: the reporting rules read off one set of traces."""
from __future__ import annotations

import math

import pytest

from tests.conftest import research_script


@pytest.fixture(scope="module")
def probe():
    return research_script("probe_reporting_rules.py")


def test_each_rule_reads_its_own_state(probe):
    # epochs x runs; run 0 peaks on val at epoch 1 (tied at epoch 3: the first counts), run 1 at epoch 2
    val = [[10.0, 10.0], [50.0, 20.0], [40.0, 60.0], [50.0, 30.0]]
    test = [[11.0, 12.0], [45.0, 25.0], [70.0, 55.0], [48.0, 90.0]]
    rules = probe.read_rules(val, test)
    assert rules["final"]["test"] == [48.0, 90.0]
    assert rules["best_val"]["val"] == [50.0, 60.0]
    assert rules["best_val"]["test"] == [45.0, 55.0]
    assert rules["max_per_run"]["test"] == [70.0, 90.0]
    # the mean curve's maximum: epoch 3 (69.0) beats epoch 2 (62.5)
    assert rules["max_of_mean"]["test"] == [69.0, 69.0]
    assert rules["max_of_mean"]["val"] == [50.0, 50.0]


def test_a_run_that_stopped_early_keeps_its_last_state(probe):
    nan = math.nan
    val = [[10.0, 10.0], [30.0, 20.0], [nan, 40.0]]
    test = [[10.0, 10.0], [35.0, 20.0], [nan, 45.0]]
    rules = probe.read_rules(val, test)
    assert rules["final"]["test"] == [35.0, 45.0]
    assert rules["max_of_mean"]["test"] == [40.0, 40.0]  # run 0 keeps its last state (35) at epoch 2
