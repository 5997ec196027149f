"""The diagnose page: self-contained HTML (no script, no network), charts for every quantity."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.diagnostics.test_verdict import _data
from zoo.diagnostics.page import render_page
from zoo.diagnostics.svg import color_scale, heatmap, line_chart


def test_page_is_self_contained_and_shows_every_configuration():
    data = _data([1e-7, 0.01, 0.1], R=2)
    page = render_page(data, title="t <x>", configs=[{"init": "xavier", "num_layers": 3},
                                                     {"init": "bal_o", "num_layers": 3}])
    assert page.startswith("<!DOCTYPE html>") and "t &lt;x&gt;" in page
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"(src|href)\s*=", page, re.I) and "url(" not in page and "@import" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg")
    assert '<tr class="diff"><td>init</td><td>xavier</td><td>bal_o</td>' in page  # the differing row stands out
    assert page.count("<svg") >= 2 * 8  # a heat map per configuration for each quantity, plus curves
    assert "layers 1–2 receive" not in page or "untrainable" in page


def test_page_refuses_mismatched_configs():
    with pytest.raises(ValueError, match="one configuration per replica"):
        render_page(_data([0.1, 0.1], R=2), title="t", configs=[{}])


def test_heatmap_cells_carry_values_and_missing_cells_are_grey():
    svg = heatmap(np.array([[1e-3, np.nan], [1.0, 10.0]]), xs=[0, 5], title="g", log=True)
    assert svg.count("<rect") >= 4 and "layer 1, epoch 5: n/a" in svg and "#e6e6e6" in svg
    assert "layer 2, epoch 5: 10" in svg
    assert color_scale(0) == "#440154" and color_scale(1) == "#fde725"


def test_line_chart_breaks_at_missing_points():
    svg = line_chart([("a", [0, 1, 2, 3], [1.0, float("nan"), 2.0, 3.0], "#000")], title="c")
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1  # (0) alone, then 2-3
