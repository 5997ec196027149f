"""A searched suite on the reproduction page: the chosen point and a partial search are visible."""
from __future__ import annotations

import json
from pathlib import Path

from tests.bench.analyze.test_best_point import _records, _suite
from zoo.bench.report import status as rp
from zoo.bench.render.report import ReportSources, to_html, to_markdown
from zoo.bench.store import records


def test_the_report_shows_the_winning_point_and_a_partial_search(tmp_path):
    suite = _suite()
    recs = _records(suite, {("lip", 0.005, 0.0): [(0.70, 0.71)] * 3, ("lip", 0.01, 0.5): [(0.80, 0.75)] * 3,
                            ("plain", 0.005, 0.0): [(0.5, 0.5)] * 3})
    folder = tmp_path / "records" / "t"
    folder.mkdir(parents=True)
    (folder / records.RESOLVED_FILE).write_text(json.dumps(suite.resolved(), default=str, sort_keys=True))
    (folder / records.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in recs))
    report = rp.Report([rp.suite_report(folder, [])], [], [])
    sources = ReportSources(records="rec", notes="n.toml", md="r.md", html="r.html", root=tmp_path)
    md, page = to_markdown(report, sources), to_html(report, sources)
    lip = next(line for line in md.splitlines() if line.startswith("| lip |"))
    assert "75.00 ± 0.00 (3) — best of 2 recorded of 4 points (partial search): lr=0.01, dropout=0.5" in lip
    assert "1 are a **partial search**" in md and "dropout 0.0, 0.5 (all" not in md
    assert "Scale: **stated-reduced** — 9 of the suite's" in md and "lr all 2" in md
    assert "best of 2 recorded of 4 points (partial search): lr=0.01, dropout=0.5" in page
    plain = next(line for line in md.splitlines() if line.startswith("| plain |"))
    assert "best of" not in plain
