"""The reproduction page gives every paper cell without records its estimated cost and class,
and per suite the ``zoo bench ... --where ...`` commands that would fill them."""
from __future__ import annotations

import functools
import json
import shutil
import statistics
from pathlib import Path

import pytest

from zoo.bench.report.missing_cost import DATA_ABSENT, NEEDS_GPU, NO_CELL, RUNS_HERE, SLICE_KEYS, pending_seconds
from zoo.bench.report.status import build_report
from zoo.bench.suite.selection import select_where
from zoo.bench.suite.load import load_suite
from zoo.bench.store.folders import read_folder
from zoo.bench.suite.cells import cell_value
from zoo.bench.plan.cost import shipped_table
from zoo.bench.plan.cost_file import shipped_model

# Under `pytest -n 2 --dist loadgroup` this module runs in one worker with the other modules that build
# reports: the report of every committed record is built once, the shipped suites expanded once.
pytestmark = pytest.mark.xdist_group("shipped_report")

ROOT = Path(__file__).resolve().parents[3]
RECORDS = ROOT / "docs" / "reproduction" / "records"


@functools.lru_cache(maxsize=1)
def _committed_report():
    return build_report(RECORDS)


@pytest.fixture
def report():
    # Cached per process, not a module fixture: pytest-xdist tears module fixtures down between its
    # batches of a worker's tests, and this report takes seconds to build.
    return _committed_report()


def test_every_unrun_paper_cell_has_a_cost_and_a_class(report):
    missing = report.missing()
    assert len(missing) == report.counts()["not run"] > 0
    with_cells = [m for m in missing if m.cells]
    assert len(with_cells) >= 0.95 * len(missing)  # a paper cell no suite cell fills is named as such
    assert all(m.seconds > 0 and m.cls in (RUNS_HERE, NEEDS_GPU, DATA_ABSENT) for m in with_cells)
    assert {RUNS_HERE, NEEDS_GPU} <= {m.cls for m in with_cells}
    assert all(m.cls == NO_CELL for m in missing if not m.cells)  # not *runs here* at 0 s
    by_suite = {s.board.suite: s for s in report.suites}
    fill = by_suite["balance_table2"].fill
    webkb = [c for c in fill if any(k == "dataset" and v[0] in ("texas_npz", "wisconsin_npz", "cornell_npz")
                                    for k, v in c.where)]
    assert all(c.cls == RUNS_HERE for c in webkb)  # the small WebKB sets run here at every depth
    assert {RUNS_HERE, NEEDS_GPU} <= {c.cls for c in fill}
    assert all(c.command().startswith("zoo bench balance_table2 --where dataset=") for c in fill)


def test_every_runs_here_paper_cell_has_a_runs_here_command(report):
    """`zoo report --todo --class runs-here` covers the page's *runs here* paper cells (each of their
    pending cells is selected by a *runs here* command; a paper cell over two depths takes one command
    per depth): a slice too large to run here is split into its cells that do (before, Tables 3/4's 63 cells at 26 min - 6 h each
    were listed only inside 'needs a GPU' slices)."""
    for s in report.suites:
        runs_here = {c["id"] for m in s.missing if m.cells and m.cls == RUNS_HERE for c in m.cells}
        if not runs_here:
            continue
        suite = load_suite(s.board.suite, validate_models=False)
        covered = {cell.id for c in s.fill if c.cls == RUNS_HERE for cell in select_where(suite, dict(c.where))}
        assert runs_here <= covered, s.board.suite


def test_runs_here_commands_have_their_data_here(report):
    """A *runs here* command's dataset is in the records' machine's mirror: CoraFull's raw file is not (it
    cannot be had offline: shared/datasets/README.md), so its oxford_table4 cells are *data absent here*
    with the reason (before, five were listed as runs here, and `zoo bench` skipped every run: "dataset
    'cora_full' unavailable")."""
    table = shipped_table()
    assert table["cora_full"]["mirrored"] is False and table["cora"]["mirrored"] is True
    for s in report.suites:
        for c in s.fill:
            datasets = [v for k, vs in c.where if k == "dataset" for v in vs]
            absent = [d for d in datasets if (table.get(d) or {}).get("mirrored") is False]
            assert (c.cls == DATA_ABSENT) == bool(absent), c.command()
    cora_full = [m for s in report.suites if s.board.suite == "oxford_table4" for m in s.missing
                 if m.entry.get("dataset") == "cora_full"]
    assert cora_full and all(m.cls == DATA_ABSENT and "cora.npz" in m.absent for m in cora_full)


def test_the_page_shows_costs_and_commands():
    md = (ROOT / "docs" / "reproduction.md").read_text()
    assert "Paper cells not run:" in md and "paper cells not run — estimated cost" in md
    assert "zoo bench balance_table2 --where dataset=" in md and "| needs a GPU |" in md and "| runs here |" in md


def test_each_fill_command_runs_the_runs_it_names(report):
    """The page's command, run into a copy of the records folder, trains exactly its stated runs
    (before, `--where dataset=cora --where num_layers=4   # 10 runs` of lipschitz_table1 selected 642)."""
    checked = 0
    for s in report.suites:
        if not s.fill:
            continue
        done = {r["id"] for r in read_folder(RECORDS / s.board.suite)[2]}
        suite = load_suite(s.board.suite, validate_models=False)
        for c in s.fill:
            selected = [cell for cell in select_where(suite, dict(c.where)) if cell.id not in done]
            assert len(selected) == c.runs, c.command()
            checked += 1
    assert checked >= 10


def test_a_suite_that_stops_early_is_costed_at_its_slices_finished_epochs(tmp_path):
    """A pending group of a suite with patience is costed at the median epochs of its slice's finished
    groups, as `zoo bench --estimate` costs it, not at the cap (before, oxford_table4's groups, which
    stop after 200-670 of their 2000 epochs, were costed at 2000: several times their measured time).
    The committed oxford_table4 records, less the last group of every slice that has two or more, make
    the pending groups beside finished ones."""
    src, dst = RECORDS / "oxford_table4", tmp_path / "records" / "oxford_table4"
    dst.mkdir(parents=True)
    shutil.copy(src / "suite.resolved.json", dst)
    records = [json.loads(line) for line in (src / "results.jsonl").read_text().splitlines() if line.strip()]
    groups = {}  # slice -> group -> its longest run's epochs
    for r in records:
        key = tuple(cell_value(r["config"], k) for k in SLICE_KEYS)
        groups.setdefault(key, {})[r["group"]] = max(groups.get(key, {}).get(r["group"], 0), r["epochs_run"])
    dropped = {list(g)[-1] for g in groups.values() if len(g) >= 2}
    (dst / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records if r["group"] not in dropped))
    s = next(s for s in build_report(tmp_path / "records").suites if s.board.suite == "oxford_table4")
    at_cap = pending_seconds("oxford_table4", "train", s.info["cells"], [r["id"] for r in s.records],
                             shipped_model("cpu"), shipped_table())
    checked = 0
    for m in s.missing:
        for c in m.cells:
            key = tuple(cell_value(c["config"], k) for k in SLICE_KEYS)
            seen = [e for g, e in groups.get(key, {}).items() if g not in dropped]
            if seen and c["group"] in dropped:
                expected, cap = statistics.median(seen), c["config"]["train"]["epochs"]
                if expected >= cap:  # a slice whose groups ran to the cap: both costings agree there
                    continue
                # per epoch alike, but for a long run's factor (cost.LONG_RUN_EPOCHS) at the cap and not below
                late = [shipped_model("cpu").long_run_factor(c["config"], "oxford_table4", e) for e in (expected, cap)]
                assert m.cell_seconds[c["id"]] == pytest.approx(
                    at_cap[c["id"]] * (expected + 1) / (cap + 1) * late[0] / late[1])
                checked += 1
    assert checked >= 5
