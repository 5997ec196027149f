"""The diagnose page: self-contained HTML (no script, no network), charts for every quantity."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.diagnostics.test_verdict import _data
from zoo.diagnostics.page import render_page, replica_colors
from zoo.diagnostics.svg import FAMILIES, color_scale, decade_ticks, heatmap, line_chart


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


def test_log_colour_bar_is_ticked_at_every_decade():
    svg = heatmap(np.array([[1e-5, 1e-4], [1e-2, 1.0]]), xs=[0, 5], title="g", log=True)
    for label in ("10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "10⁰"):
        assert f">{label}</text>" in svg
    assert decade_ticks(-20, 0) == [-20, -16, -12, -8, -4, 0]  # at most six: every 4th decade
    assert decade_ticks(-3.5, -2.5) == [-3.5, -3, -2.5]  # one decade inside: the ends too


def test_log_line_chart_axis_is_ticked_at_decades():
    svg = line_chart([("a", [0, 1], [1e-5, 0.1], "#000")], title="c", log=True)
    assert all(f">{label}</text>" in svg for label in ("10⁻⁵", "10⁻³", "10⁻¹"))


def test_line_colours_are_one_hue_family_per_init():
    configs = [{"init": i, "seed": s} for i in ("xavier", "bal_o") for s in (0, 1)]
    colours = replica_colors(["a", "b", "c", "d"], configs)
    assert len(set(colours)) == 4
    assert colours[0] in FAMILIES[0] and colours[1] in FAMILIES[0]  # xavier: shades of one hue
    assert colours[2] in FAMILIES[1] and colours[3] in FAMILIES[1]  # bal_o: another hue
    one_init = replica_colors(["a", "b"], [{"init": "xavier", "norm": "none"}, {"init": "xavier", "norm": "pairnorm"}])
    assert one_init[0] in FAMILIES[0] and one_init[1] in FAMILIES[1]  # one init: the norms get the hues
    page = render_page(_data([0.1, 0.1], R=4), title="t", configs=configs)
    assert 'stroke="#08519c"' in page and 'stroke="#3182bd"' in page and 'stroke="#a63603"' in page
