"""The papers' findings as data (zoo/bench/findings.py): verdicts, validation, the shipped files, the report."""
from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from zoo.bench import publish
from zoo.bench.analyze import board as lb
from zoo.bench.report import status as rp
from zoo.bench.report.errors import MissingNotesError
from zoo.bench.report.notes import cell_keys
from zoo.bench.render import leaderboard as render_lb
from zoo.bench.render import report as render_rp
from zoo.bench.store import folders
from zoo.cli.report import REPORT_DEFAULTS
from zoo.bench.report import findings as fd
from zoo.bench.suite.load import list_suites, load_suite, parse_suite

# Under `pytest -n 2 --dist loadgroup` the modules that build reports share one worker: the shipped
# suites are expanded once per process (cached), not once per worker.
pytestmark = pytest.mark.xdist_group("shipped_report")

P = fd.Point

# ----------------------------------------------------------------------------- one comparison

def generate(records_dir, md=None, html_path=None, **kw):
    """The report with this repository's layout (``zoo report``; :func:`zoo.bench.publish.write_report`)."""
    return publish.write_report(records_dir, md, html_path, REPORT_DEFAULTS, **kw)



def test_greater_uses_the_means_and_the_cis():
    assert fd.greater(P(5, 4, 6), P(2, 1, 3)) == fd.HOLDS_SIG  # CIs apart
    assert fd.greater(P(5, 3, 7), P(2, 0, 4)) == fd.HOLDS  # means apart, CIs overlap
    assert fd.greater(P(5, 4, 6), P(3, 2, 4)) == fd.HOLDS  # CIs touch at 4: overlap, not significant
    assert fd.greater(P(2, 0, 4), P(5, 3, 7)) == fd.INCONCLUSIVE  # the wrong way, not significantly
    assert fd.greater(P(2, 1, 3), P(5, 4, 6)) == fd.CONTRADICTED  # the opposite, significantly
    assert fd.greater(P(3, 3, 3), P(3, 3, 3)) == fd.INCONCLUSIVE  # a tie (e.g. both 100 % every run) is not "greater"
    assert fd.greater(P(9, None, None), P(1, 0, 2)) == fd.HOLDS  # n = 1: no CI, never significant ...
    assert fd.greater(P(1, None, None), P(9, 8, 10)) == fd.INCONCLUSIVE  # ... either way


def test_bounds_include_their_value():
    assert fd.at_least(P(100, 100, 100), 100) == fd.HOLDS_SIG  # every run at 100: "perfectly fits"
    assert fd.at_least(P(99.5, 99, 100), 100) == fd.INCONCLUSIVE  # the CI reaches the bound
    assert fd.at_least(P(98, 97, 99), 100) == fd.CONTRADICTED
    assert fd.at_least(P(100, 99, 101), 100) == fd.HOLDS
    assert fd.at_least(P(100 - 1e-12, None, None), 100) == fd.HOLDS  # rounding noise on the bound
    assert fd.at_most(P(20, 15, 25), 25) == fd.HOLDS_SIG and fd.at_most(P(20, 15, 26), 25) == fd.HOLDS
    assert fd.at_most(P(30, 26, 34), 25) == fd.CONTRADICTED and fd.at_most(P(26, 20, 32), 25) == fd.INCONCLUSIVE


def test_bounded_spread():
    tight = [P(1.0, 0.9, 1.1), P(2.0, 1.9, 2.1)]
    assert fd.bounded(tight, 1.2) == fd.HOLDS_SIG  # 2.1 − 0.9 = 1.2: on the bound
    assert fd.bounded(tight, 1.0) == fd.HOLDS  # the means 1.0 apart, the CIs' extremes 1.2
    assert fd.bounded(tight, 0.9) == fd.INCONCLUSIVE  # the CIs' closest ends 0.8 apart: could be within
    assert fd.bounded(tight, 0.7) == fd.CONTRADICTED
    assert fd.bounded([P(1, None, None), P(5, 4, 6)], 3) == fd.INCONCLUSIVE  # n = 1: only the means speak


def test_a_finding_combines_its_comparisons():
    assert fd.combine([fd.NOT_RUN, fd.NOT_RUN]) == fd.NOT_RUN and fd.combine([]) == fd.NOT_RUN
    assert fd.combine([fd.HOLDS_SIG, fd.NOT_RUN]) == fd.HOLDS_SIG  # over what ran (the page says how much)
    assert fd.combine([fd.HOLDS_SIG, fd.HOLDS]) == fd.HOLDS
    assert fd.combine([fd.HOLDS_SIG, fd.INCONCLUSIVE]) == fd.INCONCLUSIVE
    assert fd.combine([fd.HOLDS_SIG, fd.INCONCLUSIVE, fd.CONTRADICTED]) == fd.CONTRADICTED


# ----------------------------------------------------------------------------- synthetic boards

SUITE = {
    "suite": {"name": "synth_f", "title": "synthetic findings", "paper": "a-paper", "tables": ["Fig. 1"]},
    "defaults": {"dataset": "twin", "epochs": 3},
    "grid": {"model": ["gat", "gatv2", "gatdb"], "init": ["xavier", "bal_o"], "k": [3, 4, 5], "seed": [0, 1, 2]},
    "leaderboard": {"rows": ["model", "init"], "columns": "k", "metric": "train"},
}
# training accuracy (fraction) of seeds 0-2 per (model, k): means (%) gatdb 100; gat 82 / 72 / 62 (± 4.97);
# gatv2 52 (± 4.97) / 75 (± 24.84) / 92 (± 4.97).  bal_o = xavier + 1 point (a small, insignificant edge).
ACC = {("gatdb", 3): [1.0, 1.0, 1.0], ("gatdb", 4): [1.0, 1.0, 1.0], ("gatdb", 5): [1.0, 1.0, 1.0],
       ("gat", 3): [0.80, 0.82, 0.84], ("gat", 4): [0.70, 0.72, 0.74], ("gat", 5): [0.60, 0.62, 0.64],
       ("gatv2", 3): [0.50, 0.52, 0.54], ("gatv2", 4): [0.65, 0.75, 0.85], ("gatv2", 5): [0.90, 0.92, 0.94]}


def _value(cfg):
    v = ACC[(cfg["model"]["name"], cfg["task"]["options"]["k"])][cfg["run"]["seed"]]
    return v + (0.01 if cfg["model"]["init"] == "balanced_orthogonal" else 0.0)


def _board(raw=SUITE, keep=lambda cfg: True, value=_value):
    info = parse_suite(json.loads(json.dumps(raw)), validate_models=False).resolved()
    metric = info["leaderboard"]["metric"]
    recs = [{"id": c["id"], "config": c["config"], "metrics": {metric: value(c["config"])},
             "epochs_to_best": 10 + c["config"]["run"]["seed"]} for c in info["cells"] if keep(c["config"])]
    board = lb.aggregate(info, recs)
    return info, fd.skeleton(info), {(e.table, e.row, e.column): e for e in board.entries}


def _finding(check, fid="f1"):
    return {"id": fid, "claim": "a claim", "source": "§1, Fig. 1", "quote": "the paper says so", "check": check}


def _evaluate(check, **kw):
    info, skeleton, numbers = _board(**kw)
    findings = fd.parse_findings([_finding(check)], "test.json")
    fd.validate(findings, skeleton, cell_keys(info["leaderboard"], info["cells"]), "test.json")
    return fd.evaluate(findings, skeleton, numbers)[0]


def test_greater_per_column_pairs_cells_on_the_other_row_keys():
    r = _evaluate({"kind": "greater", "a": {"model": "gatdb"}, "b": {"model": "gat"}, "over": "k"})
    assert r.verdict == fd.HOLDS_SIG and len(r.comparisons) == 6  # 3 k x 2 inits, each init with its own
    for c in r.comparisons:  # gatdb/xavier vs gat/xavier, never across inits
        init = c.text.split(" ")[0].split("/")[1]
        assert f" > gat/{init} " in c.text
    r = _evaluate({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}})
    by_k = {c.label: c.verdict for c in r.comparisons}
    assert by_k["k = 3"] == fd.HOLDS_SIG and by_k["k = 5"] == fd.CONTRADICTED and by_k["k = 4"] == fd.INCONCLUSIVE
    assert r.verdict == fd.CONTRADICTED
    r = _evaluate({"kind": "greater", "a": {"init": "bal_o"}, "b": {"init": "xavier"},
                   "where": {"model": "gat", "k": [3, 4]}})
    assert r.verdict == fd.HOLDS and len(r.comparisons) == 2  # +1 point, CIs overlap: holds, not significantly
    r = _evaluate({"kind": "greater", "a": {"init": "bal_o"}, "b": {"init": "xavier"},
                   "where": {"model": ["gat", "gatv2"]}})
    assert len(r.comparisons) == 6  # where restricts but does not un-pair: gat vs gat, gatv2 vs gatv2 (not 12)
    assert all(c.text.split("/")[0] == c.text.split(" > ")[1].split("/")[0] for c in r.comparisons)
    r = _evaluate({"kind": "less", "a": {"model": "gatv2"}, "b": {"model": "gat"}, "where": {"k": 3}})
    assert r.verdict == fd.HOLDS_SIG


def test_bounds_trends_and_spread_on_a_board():
    r = _evaluate({"kind": "at_least", "cells": {"model": "gatdb", "init": "xavier"}, "value": 100})
    assert r.verdict == fd.HOLDS_SIG and [c.label for c in r.comparisons] == ["k = 3", "k = 4", "k = 5"]
    assert "gatdb/xavier 100.00 ± 0.00 (3) ≥ 100" in r.comparisons[0].text
    assert _evaluate({"kind": "at_most", "cells": {"model": "gatv2"}, "value": 60, "where": {"k": 3}}).verdict \
        == fd.HOLDS_SIG
    up = _evaluate({"kind": "increasing", "cells": {"model": "gatv2", "init": "xavier"}})
    assert [c.verdict for c in up.comparisons] == [fd.HOLDS, fd.HOLDS] and up.verdict == fd.HOLDS
    assert up.comparisons[0].label == "gatv2/xavier: k 3 → 4"
    down = _evaluate({"kind": "decreasing", "cells": {"model": "gat", "init": "xavier"}})
    assert down.verdict == fd.HOLDS_SIG  # 82 -> 72 -> 62, CIs ± 4.97 apart
    assert _evaluate({"kind": "increasing", "cells": {"model": "gat"}}).verdict == fd.CONTRADICTED
    flat = _evaluate({"kind": "bounded", "cells": {"model": "gatdb"}, "spread": 0})
    assert flat.verdict == fd.HOLDS_SIG and len(flat.comparisons) == 2  # one per row
    assert _evaluate({"kind": "bounded", "cells": {"model": "gatv2", "init": "xavier"}, "spread": 10}).verdict \
        == fd.CONTRADICTED  # 52 -> 92: 40 points
    fast = _evaluate({"kind": "less", "a": {"model": "gatdb"}, "b": {"model": "gat"}, "metric": "epochs_to_best"})
    assert fast.verdict == fd.INCONCLUSIVE and "11.00 ± 2.48 (3)" in fast.comparisons[0].text  # equal epochs


def test_missing_cells_are_not_run_and_partial_coverage_is_counted():
    r = _evaluate({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}},
                  keep=lambda c: c["task"]["options"]["k"] == 3)
    assert r.verdict == fd.HOLDS_SIG and (r.ran, len(r.comparisons)) == (2, 6)  # decided on what ran, said so
    none = _evaluate({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}}, keep=lambda c: False)
    assert none.verdict == fd.NOT_RUN and none.ran == 0
    one = _evaluate({"kind": "increasing", "cells": {"model": "gatv2"}},
                    keep=lambda c: c["task"]["options"]["k"] != 4)
    assert {c.verdict for c in one.comparisons} == {fd.NOT_RUN}  # neighbours 3 -> 4 and 4 -> 5 both need k = 4


def test_energies_are_compared_in_log10_with_the_ci_of_the_log_mean():
    raw = dict(SUITE, suite={"name": "synth_e", "mode": "energy_at_init"},
               leaderboard={"rows": ["model"], "columns": "k", "metric": "laplacian_energy"},
               grid={"model": ["gat", "gatv2"], "k": [3, 4], "seed": [0, 1, 2]})
    energies = {("gat", 3): [1e-1, 1e-2, 1e-3], ("gat", 4): [1e-6, 1e-7, 1e-8],
                ("gatv2", 3): [1e-2, 1e-2, 1e-2], ("gatv2", 4): [1e-2, 1e-2, 1e-2]}
    value = lambda c: energies[(c["model"]["name"], c["task"]["options"]["k"])][c["run"]["seed"]]  # noqa: E731
    info, skeleton, numbers = _board(raw, value=value)
    keys = cell_keys(info["leaderboard"], info["cells"])
    raw_f = [_finding({"kind": "decreasing", "cells": {"model": "gat"}}, "down"),
             _finding({"kind": "greater", "a": {"model": "gatv2"}, "b": {"model": "gat"}, "where": {"k": 3}}, "gt"),
             _finding({"kind": "bounded", "cells": {"model": "gat"}, "spread": 5}, "span"),
             _finding({"kind": "at_most", "cells": {"model": "gat"}, "value": 1e-5, "where": {"k": 4}}, "small")]
    findings = fd.parse_findings(raw_f, "e.json")
    fd.validate(findings, skeleton, keys, "e.json")
    got = {r.finding.id: r for r in fd.evaluate(findings, skeleton, numbers)}
    assert got["down"].verdict == fd.HOLDS_SIG  # 5 decades down, log-CI ±2.5 decades
    assert got["gt"].verdict == fd.INCONCLUSIVE  # same geometric mean (1e-2), not "greater"
    assert got["span"].verdict == fd.HOLDS and "decades" in got["span"].comparisons[0].text  # 5.0 decades apart
    assert got["small"].verdict == fd.HOLDS and "1.00e-07" in got["small"].comparisons[0].text  # CI to 3e-5


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("finding, expected", [
    (_finding({"kind": "greatr", "a": {}, "b": {}}), "unknown check kind 'greatr' (did you mean 'greater'?)"),
    (_finding({"kind": "at_least", "cell": {"model": "gat"}, "value": 1}), "no key(s) 'cell' (did you mean 'cells'?)"),
    (_finding({"kind": "at_least", "cells": {"model": "gat"}}), "needs 'value'"),
    (_finding({"kind": "at_least", "cells": {"model": "gat"}, "value": "high"}), "must be a finite number"),
    (_finding({"kind": "bounded", "cells": {"model": "gat"}, "spread": -1}), "spread must be >= 0"),
    (_finding({"kind": "increasing", "cells": []}), "must be a selector"),
    (_finding({"kind": "increasing", "cells": {"model": []}}), "empty list"),
    (_finding({"kind": "increasing", "cells": {"init": "bal_z"}}), "unknown init 'bal_z'"),
    ({**_finding({"kind": "increasing", "cells": {}}), "qoute": "x"}, "unknown key(s) 'qoute' (did you mean 'quote'"),
    ({**_finding({"kind": "increasing", "cells": {}}), "source": ""}, "non-empty string 'source'"),
    ({k: v for k, v in _finding({}).items() if k != "check"}, "needs a 'check' object"),
])
def test_the_format_is_validated(finding, expected):
    with pytest.raises(fd.FindingsError) as e:
        fd.parse_findings([finding], "x.json")
    assert expected in str(e.value) and "x.json finding #1" in str(e.value)


def test_a_suite_without_fixed_cells_is_refused():
    raw = dict(SUITE, suite={"name": "synth_p", "mode": "prune_layers"},
               leaderboard={"rows": ["model"], "columns": "layer", "metric": "pruned"})
    info = parse_suite(json.loads(json.dumps(raw)), validate_models=False).resolved()
    findings = fd.parse_findings([_finding({"kind": "increasing", "cells": {}})], "p.json")
    with pytest.raises(fd.FindingsError, match="no leaderboard cells before it runs"):
        fd.validate(findings, fd.skeleton(info), cell_keys(info["leaderboard"], info["cells"]), "p.json")


def test_duplicate_ids_are_refused():
    with pytest.raises(fd.FindingsError, match="used twice"):
        fd.parse_findings([_finding({"kind": "increasing", "cells": {}})] * 2, "x.json")


@pytest.mark.parametrize("check, expected", [
    ({"kind": "increasing", "cells": {"modle": "gat"}}, "key 'modle' is not a cell key of suite 'synth_f' "
                                                        "(did you mean 'model'?)"),
    ({"kind": "increasing", "cells": {"model": "gatdb"}, "where": {"k": 6}}, "k = 6 is not a value of any cell"),
    ({"kind": "increasing", "cells": {"model": "gatv3"}}, "unknown model 'gatv3'"),
    ({"kind": "increasing", "cells": {"model": "gat", "init": "xavier"}, "where": {"init": "bal_o"}},
     "matches no cell"),
    ({"kind": "increasing", "cells": {"model": "gat"}, "where": {"k": 3}}, "each selected row needs two column values"),
    ({"kind": "greater", "a": {"model": "gat", "init": "xavier"}, "b": {"model": "gat", "init": "xavier"}},
     "compares nothing"),
    ({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "over": "num_layers"},
     "leaderboard columns are 'k'"),
    ({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "metric": "test"}, "not this suite's metric"),
])
def test_selectors_are_validated_against_the_cells(check, expected):
    info, skeleton, _ = _board()
    with pytest.raises(fd.FindingsError) as e:
        findings = fd.parse_findings([_finding(check)], "x.json")
        fd.validate(findings, skeleton, cell_keys(info["leaderboard"], info["cells"]), "x.json")
    assert expected in str(e.value) and ("finding 'f1'" in str(e.value) or "finding #1 ('f1')" in str(e.value))


def test_a_finding_reads_the_other_measure_of_a_mode_that_does_not_train():
    """On an effective-rank board a finding may read the distance to equal rows that rank_at_init records
    beside it; the rules for accuracy boards stay: another split on a test board only."""
    def reads_other(metric, board_metric):
        return fd.other_split(types.SimpleNamespace(metric=metric), {"metric": board_metric})

    assert reads_other("equal_rows_distance", "effective_rank")
    assert not reads_other("laplacian_energy", "effective_rank")  # another mode's measure
    assert not reads_other(None, "effective_rank") and not reads_other("effective_rank", "effective_rank")
    assert reads_other("val", "test") and reads_other("self_attention", "test")
    assert not reads_other("test", "train")


# ----------------------------------------------------------------------------- the shipped findings

def _has_findings(name: str) -> bool:
    from zoo._toml import tomllib
    from zoo.bench.suite.load import suites_dir

    meta = tomllib.loads((suites_dir() / f"{name}.toml").read_text()).get("suite", {})
    return bool(meta.get("reported") and json.loads((suites_dir() / meta["reported"]).read_text()).get("findings"))


WITH_FINDINGS = [n for n in list_suites() if _has_findings(n)]


def test_the_shipped_suites_carry_findings():
    assert {"oxford_fig1", "lipschitz_fig5", "balance_fig6_7", "balance_table2", "balance_table7", "nonlocal_energy",
            "nonlocal_accuracy", "quick"} <= set(WITH_FINDINGS)


@pytest.mark.parametrize("name", WITH_FINDINGS)
def test_shipped_findings_validate_and_hold_on_the_papers_own_numbers(name):
    """Every shipped finding names real cells of its suite (a typo cannot hide), and where the
    paper stores numbers for the cells it compares, they do not contradict it (a check written
    the wrong way round would)."""
    suite = load_suite(name, validate_models=False)
    info = suite.resolved()
    findings = fd.parse_findings(suite.reported["findings"], name)
    skeleton = fd.skeleton(info)
    fd.validate(findings, skeleton, cell_keys(info["leaderboard"], info["cells"]), name)
    for r in fd.evaluate(findings, skeleton, {}, suite.reported):
        assert r.verdict == fd.NOT_RUN and r.comparisons
        assert r.paper != fd.CONTRADICTED, (r.finding.id, [c for c in r.paper_comparisons
                                                           if c.verdict == fd.CONTRADICTED])
        assert r.finding.quote.strip('"') and r.finding.source


# ----------------------------------------------------------------------------- the report


def _folder(path: Path, findings, keep=lambda cfg: True) -> Path:
    info = parse_suite(json.loads(json.dumps(SUITE)), validate_models=False).resolved()
    info["reported"] = {"entries": [], "findings": findings}
    path.mkdir(parents=True)
    (path / "suite.resolved.json").write_text(json.dumps(info))
    lines = [json.dumps({"id": c["id"], "config": c["config"], "metrics": {"train": _value(c["config"])},
                         "wall_time_s": 1.0, "device": "cpu (test)", "commit": "abc1234", "epochs_to_best": 5,
                         "diverged": False}) for c in info["cells"] if keep(c["config"])]
    (path / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return path


FINDINGS = [
    {**_finding({"kind": "at_least", "cells": {"model": "gatdb"}, "value": 100}, "gatdb_fits"),
     "quote": "GATDB is able to perfectly fit the data every time."},
    _finding({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "over": "k"}, "gat_beats_gatv2"),
]
FINDING_NOTE = '[[note]]\nsuite = "synth_f"\nfinding = "gat_beats_gatv2"\nstatus = "differs"\nnote = "k = 5: seeds"\n'


def test_the_report_decides_and_renders_findings(tmp_path):
    _folder(tmp_path / "rec" / "s", FINDINGS)
    (tmp_path / "notes.toml").write_text(FINDING_NOTE)
    report, problems = generate(tmp_path / "rec", md=tmp_path / "r.md", html_path=tmp_path / "r.html",
                                   notes_path=tmp_path / "notes.toml")
    assert not problems
    got = {r.finding.id: r for r in report.suites[0].findings}
    assert got["gatdb_fits"].verdict == fd.HOLDS_SIG and got["gat_beats_gatv2"].verdict == fd.CONTRADICTED
    counts = report.finding_counts()
    assert (counts["held"], counts["significant"], counts["contradicted"]) == (1, 1, 1)
    text = (tmp_path / "r.md").read_text()
    assert "### synth_f: findings" in text and "**`gat_beats_gatv2` — contradicted — explained.**" in text
    assert "> “GATDB is able to perfectly fit the data every time.” — §1, Fig. 1" in text
    assert "  - k = 5: gat/xavier 62.00 ± 4.97 (3) > gatv2/xavier 92.00 ± 4.97 (3) — contradicted\n" in text
    assert "- Ours (6 of 6 comparisons run):" in text
    assert "- Note: (differs) k = 5: seeds" in text and "| 1 / 1 / 0 / 0 |" in text  # per-suite counts
    assert f"| {counts['held']} | 1 | 1 | 0 | {counts['not run']} |" in text  # the summary
    html = (tmp_path / "r.html").read_text()
    assert "synth_f: findings</h3>" in html and "contradicted — explained" in html and "k = 5: seeds" in html
    assert render_rp.to_markdown(rp.build_report(tmp_path / "rec", tmp_path / "notes.toml"), REPORT_DEFAULTS) == text  # deterministic


def test_a_contradicted_finding_needs_a_note(tmp_path):
    _folder(tmp_path / "rec" / "s", FINDINGS)
    with pytest.raises(MissingNotesError) as e:
        generate(tmp_path / "rec", md=tmp_path / "r.md", html_path=None, notes_path=tmp_path / "none.toml")
    assert '1 contradicted finding(s) have no note' in str(e.value) and 'finding = "gat_beats_gatv2"' in str(e.value)
    assert "open cell(s)" not in str(e.value) and not (tmp_path / "r.md").exists()
    _, problems = generate(tmp_path / "rec", md=tmp_path / "r.md", html_path=None,
                              notes_path=tmp_path / "none.toml", draft=True)
    assert problems and rp.MISSING_NOTE in (tmp_path / "r.md").read_text()


@pytest.mark.parametrize("note, expected", [
    (FINDING_NOTE.replace('"gat_beats_gatv2"', '"gat_beats_gatv3"'), "did you mean 'gat_beats_gatv2'"),
    (FINDING_NOTE + "when = { k = 5 }\n", "either a finding or cells"),
])
def test_finding_notes_are_validated(tmp_path, note, expected):
    _folder(tmp_path / "rec" / "s", FINDINGS)
    (tmp_path / "notes.toml").write_text(note)
    with pytest.raises(rp.ReportError, match=expected):
        rp.build_report(tmp_path / "rec", tmp_path / "notes.toml")


def test_a_bad_finding_in_the_records_is_a_report_error(tmp_path):
    _folder(tmp_path / "rec" / "s", [_finding({"kind": "greater", "a": {"model": "gat"}, "b": {"modl": "gatv2"}})])
    with pytest.raises(rp.ReportError, match="did you mean 'model'"):
        rp.build_report(tmp_path / "rec", tmp_path / "none.toml")


def test_findings_added_to_the_shipped_file_do_not_mark_the_numbers_edited(tmp_path):
    """Regression: the records' stored copy of the paper's numbers predates the findings; only a
    change of the numbers (``entries``) means "edited since these records were made"."""
    shipped = json.loads((REPORT_DEFAULTS.root / "benchmarks/suites/reported/balance_table2.json").read_text())
    assert shipped["findings"]
    folder = tmp_path / "rec" / "balance_table2"
    info = load_suite("balance_table2", validate_models=False).resolved()
    info["reported"] = {k: v for k, v in shipped.items() if k != "findings"}  # as stored before the findings
    info["cells"] = info["cells"][:2]
    folder.mkdir(parents=True)
    (folder / "suite.resolved.json").write_text(json.dumps(info))
    (folder / "results.jsonl").write_text("".join(
        json.dumps({"id": c["id"], "config": c["config"], "metrics": {"test": 0.4}, "wall_time_s": 1.0}) + "\n"
        for c in info["cells"]))
    report = rp.build_report(tmp_path / "rec", tmp_path / "none.toml")
    assert not report.suites[0].reported_changed
    assert [r.finding.id for r in report.suites[0].findings] == [f["id"] for f in shipped["findings"]]


def test_every_run_must_meet_an_each_run_bound():
    """'fits the data every time': one run short of the bound contradicts it, whatever the mean's CI."""
    acc = dict(ACC)
    acc[("gatdb", 5)] = [1.0, 1.0, 0.85]  # one seed does not fit: mean 95 ± 21.5, CI reaches 100
    value = lambda c: acc[(c["model"]["name"], c["task"]["options"]["k"])][c["run"]["seed"]]  # noqa: E731
    check = {"kind": "at_least", "cells": {"model": "gatdb", "init": "xavier"}, "value": 100}
    assert _evaluate(check, value=value).verdict == fd.INCONCLUSIVE  # on the mean: cannot tell
    r = _evaluate({**check, "runs": "each"}, value=value)
    assert [c.verdict for c in r.comparisons] == [fd.HOLDS, fd.HOLDS, fd.CONTRADICTED]
    assert r.verdict == fd.CONTRADICTED and "min over runs 85.00" in r.comparisons[2].text
    low = _evaluate({"kind": "at_most", "cells": {"model": "gat", "init": "xavier"}, "value": 83, "runs": "each",
                     "where": {"k": 3}}, value=value)
    assert low.verdict == fd.CONTRADICTED and "max over runs 84.00" in low.comparisons[0].text  # mean 82 <= 83
    with pytest.raises(fd.FindingsError, match="check.runs must be one of 'mean', 'each'"):
        fd.parse_findings([_finding({**check, "runs": "all"})], "x.json")
    with pytest.raises(fd.FindingsError, match="has no key\\(s\\) 'runs'"):
        fd.parse_findings([_finding({"kind": "increasing", "cells": {}, "runs": "each"})], "x.json")


def test_cli_exit_code_for_a_contradicted_finding_without_a_note(tmp_path, capsys):
    from zoo.cli import main

    _folder(tmp_path / "rec" / "s", FINDINGS)
    args = ["report", str(tmp_path / "rec"), "--md", str(tmp_path / "r.md"), "--html", str(tmp_path / "r.html")]
    assert main([*args, "--notes", str(tmp_path / "none.toml")]) == 1
    assert 'finding = "gat_beats_gatv2"' in capsys.readouterr().err
    (tmp_path / "notes.toml").write_text(FINDING_NOTE)
    assert main([*args, "--notes", str(tmp_path / "notes.toml")]) == 0
    assert "zoo report: findings held 1, significant 1, contradicted 1, inconclusive 0" in capsys.readouterr().out


def test_a_margin_makes_greater_within_the_margin_or_better():
    # gat at k = 3 is 82 ± 4.97, gatv2 at k = 5 is 92 ± 4.97: gat is 10 points below (per k: 20 / -3 / -30)
    assert fd.greater(P(5, 4, 6), fd.shifted(P(5.5, 5, 6), -1.0)) == fd.HOLDS  # half a point below: within 1
    assert fd.greater(P(5, 4.8, 5.2), fd.shifted(P(5.5, 5.4, 5.6), -1.0)) == fd.HOLDS_SIG
    assert fd.greater(P(2, 1.8, 2.2), fd.shifted(P(5, 4.8, 5.2), -1.0)) == fd.CONTRADICTED  # 3 points below
    r = _evaluate({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "margin": 5,
                   "where": {"init": "xavier"}})
    by_k = {c.label: c.verdict for c in r.comparisons}
    assert by_k["k = 4"] == fd.HOLDS and by_k["k = 5"] == fd.CONTRADICTED  # 72 vs 75 - 5 holds; 62 vs 92 - 5 not
    assert "− 5" in r.comparisons[0].text and "− 5" in fd.describe(r.finding, {"metric": "train", "columns": "k"})
    with pytest.raises(fd.FindingsError, match="margin"):
        fd.parse_findings([_finding({"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"},
                                     "margin": -1})], "test.json")
    with pytest.raises(fd.FindingsError, match="margin"):
        fd.parse_findings([_finding({"kind": "at_least", "cells": {"model": "gat"}, "value": 1, "margin": 1})],
                          "test.json")


def test_a_board_whose_tables_and_columns_are_one_key_names_it_once():
    """A board with a table per dataset and a column per dataset (field_2024's) places a comparison by
    ``dataset = cora``, not ``dataset = cora, dataset = cora``."""
    board = type("B", (), {})()
    board.layout = {"table_by": "dataset", "columns": "dataset", "rows": ["variant"]}
    entries = [type("E", (), {"table": t, "column": t})() for t in ("cora", "texas")]
    board.entries = entries
    assert fd._place(board, entries[0]) == "dataset = cora"
    board.layout = {"table_by": "dataset", "columns": "num_layers", "rows": ["model"]}
    entries[0].column = 2
    assert fd._place(board, entries[0]) == "dataset = cora, num_layers = 2"
