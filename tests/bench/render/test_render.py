"""render/: pages as strings from in-memory boards and reports (no IO), naming the caller's paths."""
import json
from pathlib import Path

from zoo.bench.analyze.board import aggregate
from zoo.bench.report.status import Report
from zoo.bench.render.leaderboard import to_csv, to_json, to_markdown
from zoo.bench.render.report import ReportSources, to_html, to_markdown as report_markdown


def _record(layers, value, metric="test", seed=0):
    config = {"model": {"name": "gat", "init": "xavier", "norm": "none", "init_kwargs": {}, "norm_kwargs": {},
                        "kwargs": {"num_layers": layers}},
              "task": {"dataset": "cora", "split": None, "data_seed": 0, "transforms": [], "options": {}},
              "train": {}, "run": {"seed": seed}}
    return {"id": f"{layers}-{seed}", "config": config, "metrics": {metric: value}, "epochs_to_best": 3,
            "diverged": False, "commit": "abc", "device": "cpu"}


def _info(metric="test"):
    return {"name": "toy", "meta": {"title": "Toy"}, "cells": [],
            "leaderboard": {"rows": ["model", "init"], "columns": "num_layers", "metric": metric}}


def test_leaderboard_pages_from_records_in_memory():
    board = aggregate(_info(), [_record(2, 0.8), _record(2, 0.9, seed=1), _record(4, 0.5)])
    md = to_markdown(board)
    assert "| gat | xavier | 85.00 ± " in md and "50.00 (n=1)" in md and "Metric: **test** (%)" in md
    rows = json.loads(to_json([board]))[0]["entries"]
    assert [r["column_value"] for r in rows] == [2, 4] and rows[0]["n"] == 2
    assert to_csv([board]).splitlines()[0].startswith("suite,table,model,init,column")


def test_energy_boards_read_the_declared_metric():
    """laplacian_energy is declared geometric: geometric mean, scientific notation, no percent scale."""
    board = aggregate(_info("laplacian_energy"), [_record(2, 1e-3, "laplacian_energy"), _record(2, 1e-1, "laplacian_energy", seed=1)])
    assert board.entries[0].summary.kind == "geometric"
    assert "1.00e-02 [" in to_markdown(board) and "(%)" not in to_markdown(board)


def test_report_names_the_callers_paths():
    """The report code hard-codes no repository path: the sources given are the ones on the page."""
    sources = ReportSources(records="rec", notes="rec/../n.toml", md="out/r.md", html="out/r.html", root=Path("."))
    report = Report([], [], [])
    md, page = report_markdown(report, sources), to_html(report, sources)
    assert "zoo report rec --md out/r.md --html out/r.html" in md and "`rec/<suite>/`" in md
    assert "docs/reproduction" not in md and "docs/reproduction" not in page
    assert "<code>out/r.md</code>" in page


def test_report_page_text_drops_markdown_emphasis():
    """The HTML page's summary lines (the missing cells' totals) carry no literal Markdown marks."""
    from zoo.bench.render.report import _plain
    assert _plain("144 *runs here* (≤ 6 CPU-hours each), 3 with *no cell of the suite*; **held** `zoo`") == \
        "144 runs here (≤ 6 CPU-hours each), 3 with no cell of the suite; held zoo"
    assert _plain("suites/reported/*.json and 2 * 3") == "suites/reported/*.json and 2 * 3"
