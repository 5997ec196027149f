"""Notes bound to their records (zoo/bench/report/note_figures.py): placeholders filled from the
records, figures written out checked against them, one note printed once per suite, and the
*underspecified* status with what the paper leaves out."""
from __future__ import annotations

import re

import pytest

from tests.bench.report.test_status import DIFF_NOTE, OPEN_NOTE, SUITE, generate, make_folder, write_notes
from zoo.bench.report import status as rp
from zoo.bench.render import report as render_rp
from tests.conftest import REPO
from zoo._toml import tomllib
from zoo.cli.report import REPORT_DEFAULTS

pytestmark = pytest.mark.xdist_group("shipped_report")


@pytest.fixture
def records(tmp_path):
    make_folder(tmp_path / "records" / "synth")
    return tmp_path / "records"


def _note(when: str, text: str, status: str = "open", extra: str = "") -> str:
    return f'[[note]]\nsuite = "synth"\nwhen = {{{when}}}\nstatus = "{status}"\nnote = "{text}"\n{extra}'


def test_placeholders_are_filled_from_the_records(records, tmp_path):
    text = ("ours {{ours}}, {{mean_ci}} over seeds {{seeds}} ({{values}}); paper {{paper}}, Δ {{delta}} {{interval}}; "
            "{{status}}; at two seeds {{mean_ci: seeds = 0-1}}; L = 2 {{mean: num_layers = 2}}; "
            "epochs {{epochs}}, optimizer {{optimizer: num_layers = 2}}")
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, _note('init = "xavier", num_layers = 4', text))
    report = rp.build_report(records)
    note = next(n for n in report.notes if "ours" in n.raw)
    assert note.text == ("ours 70.00 ± 0.00 (3), 70.00 ± 0.00 over seeds 0–2 (70.0 / 70.0 / 70.0); paper 75.00 ± 1.00, "
                         "Δ -5.00 [-7.20, -2.80]; open; at two seeds 70.00 ± 0.00; L = 2 60.00; "
                         "epochs 7, optimizer adam")
    assert report.figure_problems == []


@pytest.mark.parametrize("text, expected", [
    ("{{ours: num_layers = 3}}", "matches 0 cells"),
    ("{{ours: num_layers = 2}}", "matches 2 cells"),  # the note selects init only at L = 2: xavier and bal_x
    ("{{mean_ci: seeds = 0-5}}", "no run of seed(s) [3, 4, 5]"),
    ("{{average}}", "unknown placeholder field 'average'"),
])
def test_a_placeholder_names_exactly_one_cell(records, tmp_path, text, expected):
    when = 'num_layers = 4, init = "xavier"' if "seeds" in text or "average" in text else 'model = "gat"'
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, OPEN_NOTE, _note(when, text))
    with pytest.raises(rp.ReportError, match=re.escape(expected)):
        rp.build_report(records)


def test_a_figure_written_out_that_the_records_state_is_refused(records, tmp_path):
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, _note('init = "xavier", num_layers = 4', "ours 70.00 ± 0.00"))
    problems = rp.build_report(records).figure_problems
    assert len(problems) == 1 and "restates the records" in problems[0] and "{{ours: ...}}" in problems[0]


def test_a_stale_figure_is_refused(tmp_path):
    """Regression: the Actor Xavier L = 2 note still gave its three-seed figures after seeds 3-4 were
    added. Here bal_x L = 4 has seeds 0-2 (79 / 80 / 81); a note quoting seeds 0-1 (79.5 ± 6.35) is stale."""
    make_folder(tmp_path / "records" / "synth")
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, OPEN_NOTE,
                _note('init = "xavier", num_layers = 2', "bal_x at L = 4 was 79.50 ± 6.35"))
    problems = rp.build_report(tmp_path / "records").figure_problems
    assert len(problems) == 1 and "over its first 2 runs" in problems[0] and "80.00 ± 2.48 (3)" in problems[0]


@pytest.mark.parametrize("text, key", [
    ("Tried: the suite's protocol (SGD lr 0.1, up to 7 epochs)", None),  # the cells' optimizer is adam: not checked
    ("Tried: the suite's protocol (Adam lr 0.1, up to 7 epochs)", "lr"),  # regression: a note's lr the records did not run
    ("Tried: the suite's protocol (Adam lr 0.005, up to 5000 epochs)", "epochs"),
    ("Tried: the suite's protocol (Adam lr 0.005, stop at training loss 1e-5)", "loss_threshold"),  # regression: Table 7
])
def test_a_protocol_figure_the_records_did_not_run_is_refused(records, tmp_path, text, key):
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, _note('init = "xavier", num_layers = 4', text))
    problems = rp.build_report(records).figure_problems
    assert problems == [] if key is None else (len(problems) == 1 and f"write {{{{{key}}}}}" in problems[0])


def test_a_note_spanning_tables_is_printed_once(tmp_path):
    """Regression: a note matching cells of several tables of a suite (balance_table2's Texas and
    Wisconsin) was printed under each table."""
    raw = dict(SUITE, leaderboard=dict(SUITE["leaderboard"], table_by="init", rows=["model"]))
    make_folder(tmp_path / "records" / "synth", raw=raw)
    write_notes(tmp_path / "notes.toml", _note("num_layers = [2, 4]", "one long note", status="differs"))
    text = render_rp.to_markdown(rp.build_report(tmp_path / "records"), REPORT_DEFAULTS)
    assert text.count("one long note") == 1 and "Note(s) [1] above." in text


UNDERSPECIFIED = _note('init = "xavier"', "the paper gives no initialisation", status="underspecified",
                       extra='leaves_out = [{ choice = "initialisation", sensitivity = "1.3x Xavier: +0.4" }]\n')


def test_underspecified_cells_are_counted_apart_with_what_the_paper_leaves_out(records, tmp_path):
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, UNDERSPECIFIED)
    md = tmp_path / "r.md"
    report, problems = generate(records, md=md, html_path=None)
    assert not problems and report.counts()[rp.UNDERSPECIFIED] == 2 and report.counts()[rp.OPEN] == 0
    text = md.read_text()
    assert "(1) initialisation — 1.3x Xavier: +0.4" in text and text.count("| underspecified | [") == 2


@pytest.mark.parametrize("extra, expected", [
    ("", "must list what the paper leaves out"),
    ('leaves_out = [{ choice = "initialisation" }]\n', "needs exactly the non-empty strings choice and sensitivity"),
    ('leaves_out = [{ choice = "init", sensitivity = "" }]\n', "needs exactly the non-empty strings"),
])
def test_an_underspecified_note_must_measure_each_missing_choice(records, tmp_path, extra, expected):
    write_notes(tmp_path / "notes.toml", _note('init = "xavier"', "x", status="underspecified", extra=extra))
    with pytest.raises(rp.ReportError, match=expected):
        rp.build_report(records)


def test_leaves_out_belongs_to_underspecified_notes(records, tmp_path):
    write_notes(tmp_path / "notes.toml", _note('init = "xavier"', "x", extra='leaves_out = []\n'))
    with pytest.raises(rp.ReportError, match="belongs to a note with status"):
        rp.build_report(records)


def _shipped_note(suite: str, **when) -> str:
    notes = tomllib.loads((REPO / "docs" / "reproduction" / "notes.toml").read_text())["note"]
    found = [n["note"] for n in notes if n["suite"] == suite and all(n.get("when", {}).get(k) == v
                                                                       for k, v in when.items())]
    assert len(found) == 1, (suite, when, len(found))
    return found[0]


def test_the_drifted_notes_quote_the_records_through_placeholders():
    """Regression: the notes the audit found drifted from their records (the three-seed Actor figures,
    SGD lr 0.1 where the records ran 0.05, a loss stop of 1e-5 where they stopped at 1e-4) now take
    those figures from the records; the Amazon Photo note weighs the validation reading."""
    actor = _shipped_note("balance_table2", dataset=["chameleon_npz", "actor_npz", "squirrel_npz"], num_layers=2)
    assert "seeds 3–4 untried" not in actor and "SGD lr {{lr" in actor and "{{mean_ci" in actor
    citeseer = _shipped_note("balance_table2", dataset="citeseer", init="xavier", num_layers=10)
    table3 = _shipped_note("balance_table3_4", dataset="cora", num_layers=10, variant="sgd_vanilla")
    assert all("SGD lr {{lr}}" in n and "lr 0.1" not in n for n in (citeseer, table3))
    table7 = [_shipped_note("balance_table7", dataset="cora", init="xavier", num_layers=2),
              _shipped_note("balance_table7", dataset="citeseer", init="xavier", num_layers=5)]
    assert all("1e-5" not in n and "{{loss_threshold}}" in n for n in table7)
    photo = _shipped_note("oxford_table4", variant="gat_d", dataset="amazon_photo")
    assert "{{mean_ci: metric = val}}" in photo and "validation" in photo


def test_a_stale_list_of_run_values_is_refused(tmp_path):
    """A note listing a cell's per-run values at three seeds after more were added (the Actor case
    written as a list): bal_x L = 2 is 40 / 40 / 40 at seeds 0-2; here it has a fourth run."""
    extra = dict(SUITE, grid=dict(SUITE["grid"], seed=[0, 1, 2, 3]))
    make_folder(tmp_path / "records" / "synth", raw=extra,
                metric=lambda cfg: {"train": 0.4 if cfg["model"]["kwargs"]["num_layers"] == 2 else 0.7})
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, OPEN_NOTE,
                _note('init = "xavier", num_layers = 2', "runs 40.0 / 40.0 / 40.0 at three seeds"))
    problems = rp.build_report(tmp_path / "records").figure_problems
    assert len(problems) == 1 and "first 3 runs; it has 4 now" in problems[0]


def test_a_list_of_run_values_the_records_state_is_refused(records, tmp_path):
    write_notes(tmp_path / "notes.toml", DIFF_NOTE, OPEN_NOTE,
                _note('init = "xavier", num_layers = 2', "bal_x at L = 4: 79.0 / 80.0 / 81.0"))
    problems = rp.build_report(records).figure_problems
    assert len(problems) == 1 and "restates the records" in problems[0] and "{{values: ...}}" in problems[0]
