"""Every paper's stored numbers and protocol choices: each stored 95 % CI is a possible five-run t interval, and
each protocol choice names its source."""
from __future__ import annotations

import json
import math

import pytest

from tests.papers.shipped import REPORTED, SUITES


T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _max_t_half_width(mean: float, n: int) -> float:
    """The largest 95 % t-CI half-width of n accuracies in [0, 100] with this mean."""
    variance = mean * (100 - mean) * n / (n - 1)  # the sample variance's maximum at this mean
    return T95[n - 1] * math.sqrt(variance / n)


@pytest.mark.parametrize("path", sorted(REPORTED.glob("*.json")), ids=lambda p: p.stem)
def test_every_stored_ci95_is_a_possible_five_run_t_interval(path):
    data = json.loads(path.read_text())
    if data.get("scale") != "percent":
        return
    for e in data["entries"]:
        if e.get("ci95") is not None:
            n = int(e.get("n", 5))
            assert e["ci95"] <= _max_t_half_width(float(e["value"]), n) + 1e-9, \
                f"{path.name}: {e} is not a 95 % CI over {n} runs; store it as 'spread' (unspecified)"


@pytest.mark.parametrize("name,phrase", [
    ("oxford_table3", "dropout annealing"), ("oxford_table3", "--set bias=true"),
    ("oxford_table4", "--set bias=true"), ("balance_table3_4", "0.0001"),
])
def test_protocol_choices_are_recorded_with_their_source(name, phrase):
    assert phrase in (SUITES / f"{name}.toml").read_text()
