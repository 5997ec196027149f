"""Energy leaderboards render as energies: geometric mean, scientific notation, Δlog10 against the paper, and no
empty paper columns without reported numbers."""
from __future__ import annotations

import math

import pytest


def _energy_board(values, reported=None, metric="laplacian_energy"):
    from zoo.bench.analyze.board import aggregate

    cfg = {"model": {"name": "san_post_ln", "init": "xavier", "norm": "none", "init_kwargs": {}, "norm_kwargs": {},
                     "kwargs": {"num_layers": 32}},
           "task": {"dataset": "cora", "split": None, "transforms": [], "data_seed": 0, "options": {}},
           "train": {}, "run": {"seed": 0, "variant": None}}
    recs = [{"config": cfg, "metrics": {metric: v}} for v in values]
    info = {"name": "e", "meta": {"title": "energies"}, "reported": reported,
            "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": metric}}
    return aggregate(info, recs)


def test_energy_leaderboard_is_geometric_scientific_and_log10():
    from zoo.bench.render.leaderboard import to_markdown

    reported = {"entries": [{"table": "Table 4", "model": "san_post_ln", "num_layers": 32, "value": 1.04e-5,
                             "metric": "laplacian_energy"}]}
    board = _energy_board([6.3e-5, 1.26e-2], reported)
    entry = board.entries[0]
    assert entry.summary.mean == pytest.approx(math.sqrt(6.3e-5 * 1.26e-2))  # not (6.3e-5 + 1.26e-2) / 2
    assert entry.summary.low == 6.3e-5 and entry.summary.high == 1.26e-2
    assert entry.diff == pytest.approx(math.log10(entry.summary.mean) - math.log10(1.04e-5))
    md = to_markdown(board)
    assert "8.91e-04 [6.3e-05 … 1.3e-02] (2)" in md
    assert "1.04e-05" in md and "Δlog10" in md and "+1.93" in md
    assert "(%)" not in md and "percent" not in md.lower().replace("not a percentage", "")
    tiny = to_markdown(_energy_board([1e-5, 1e-5]))
    assert "1.00e-05" in tiny and "0.0000" not in tiny


def test_no_empty_paper_columns_without_reported_numbers():
    from zoo.bench.render.html import to_html
    from zoo.bench.render.leaderboard import to_markdown

    board = _energy_board([0.5, 0.7], None, metric="test")
    md = to_markdown(board)
    header = next(line for line in md.splitlines() if line.startswith("| model"))
    assert "paper" not in header and "Δ" not in header
    assert "<th>paper</th>" not in to_html([board])
    with_paper = _energy_board([0.5, 0.7], {"entries": [{"table": "T", "model": "san_post_ln", "value": 55.0,
                                                          "metric": "test"}]}, metric="test")
    assert "| paper |" in to_markdown(with_paper)
