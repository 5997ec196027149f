"""Model selection over a [search]: the best point per cell, partial searches, and how pages show it."""
from __future__ import annotations

import copy
import json

from zoo.bench.analyze import board as lb
from zoo.bench.report.scale import describe_scale
from zoo.bench.analyze.best_point import choose
from zoo.bench.render.leaderboard import to_json, to_markdown
from zoo.bench.suite.load import parse_suite
from zoo.bench.store import records

RAW = {
    "suite": {"name": "t"},
    "defaults": {"dataset": "twin", "model": "gat", "epochs": 3, "hidden_dim": 8, "lr": 0.005},
    "grid": {"num_layers": [1], "variant": ["plain", "lip"], "seed": [0, 1, 2]},
    "variants": {"plain": {"norm": "none"}, "lip": {"norm": "lipschitz"}},
    "leaderboard": {"rows": ["variant"], "metric": "test"},
    "search": {"lr": [0.01, 0.005], "dropout": [0.0, 0.5], "metric": "val", "when": {"variant": "lip"}},
}


def _rec(seed, val):
    """A record of one seed: all ``choose`` reads (the search axes are none here)."""
    return {"config": {"run": {"seed": seed}}, "metrics": {"val": val}}


def test_the_best_mean_over_the_seeds_every_point_has_wins():
    # A: 5 seeds, mean over all .80 but over seeds 0-2 only .76; B: seeds 0-2 at .78 -> B wins on common seeds
    runs = {"A": [_rec(s, v) for s, v in enumerate([0.75, 0.76, 0.77, 0.86, 0.86])],
            "B": [_rec(s, v) for s, v in enumerate([0.78, 0.78, 0.78])]}
    key, choice = choose(runs, ["A", "B", "C"], "val", [])
    assert key == "B" and choice.seeds == (0, 1, 2) and abs(choice.score - 0.78) < 1e-12
    assert choice.points == 3 and choice.recorded == 2 and choice.partial
    assert "best of 2 recorded of 3 points (partial search)" in choice.describe()


def test_ties_go_to_the_point_listed_first_and_no_common_seed_uses_each_points_runs():
    runs = {"A": [_rec(0, 0.7)], "B": [_rec(0, 0.7)]}
    assert choose(runs, ["B", "A"], "val", [])[0] == "B"
    runs = {"A": [_rec(0, 0.7)], "B": [_rec(1, 0.9)]}
    key, choice = choose(runs, ["A", "B"], "val", [])
    assert key == "B" and choice.seeds == () and not choice.partial and choice.describe().startswith("best of 2: ")


def _suite():
    return parse_suite(copy.deepcopy(RAW))


def _records(suite, val_test):
    """A record for every cell whose (variant, lr, dropout) is in ``val_test``: {point: [(val, test) per seed]}."""
    out = []
    for c in suite.cells:
        cfg = c.config
        key = (cfg["run"]["variant"], cfg["train"]["lr"], cfg["model"]["kwargs"].get("dropout", 0.0))
        if key in val_test and c.seed < len(val_test[key]):
            val, test = val_test[key][c.seed]
            out.append({"id": c.id, "config": cfg, "metrics": {"val": val, "test": test, "train": 1.0},
                        "epochs_to_best": 5, "diverged": False, "commit": "abc", "device": "cpu"})
    return out


def test_the_board_shows_the_point_chosen_by_the_selection_metric():
    """Selected by validation accuracy, shown on test: the point with the best test accuracy loses
    when its validation accuracy is lower (no selection on the test set)."""
    suite = _suite()
    recs = _records(suite, {
        ("lip", 0.005, 0.0): [(0.70, 0.90)] * 3,                      # best test, worse val
        ("lip", 0.01, 0.5): [(0.80, 0.60), (0.82, 0.62), (0.81, 0.61)],  # best val: the winner
        ("lip", 0.01, 0.0): [(0.75, 0.70)] * 3,
        ("lip", 0.005, 0.5): [(0.60, 0.50)] * 3,
        ("plain", 0.005, 0.0): [(0.50, 0.40)] * 3,                    # not searched
    })
    board = lb.aggregate(suite.resolved(), recs)
    by_row = {e.row: e for e in board.entries}
    lip, plain = by_row[("lip",)], by_row[("plain",)]
    assert lip.summary.n == 3 and abs(lip.summary.mean - 61.0) < 1e-9  # the winner's test accuracy, in %
    assert lip.search.point == {"lr": 0.01, "dropout": 0.5} and lip.search.metric == "val"
    assert lip.search.points == 4 and lip.search.recorded == 4 and not lip.search.partial
    assert plain.search is None and abs(plain.summary.mean - 40.0) < 1e-9
    md = to_markdown(board)
    assert "61.00 ± " in md and "— best of 4: lr=0.01, dropout=0.5" in md
    assert "best mean **val** accuracy" in md and "1 of 1 searched cells have every point recorded." in md
    row = next(r for r in json.loads(to_json([board]))[0]["entries"] if r["variant"] == "lip")
    assert row["search_point"] == "lr=0.01, dropout=0.5" and row["search_recorded"] == 4
    assert row["search_partial"] is False and row["search_seeds"] == [0, 1, 2]


def test_a_partial_search_says_so_on_every_page():
    suite = _suite()
    recs = _records(suite, {("lip", 0.005, 0.0): [(0.70, 0.71)] * 3, ("lip", 0.01, 0.0): [(0.72, 0.73)] * 3})
    board = lb.aggregate(suite.resolved(), recs)
    (e,) = board.entries
    assert e.search.partial and e.search.recorded == 2 and e.search.points == 4
    md = to_markdown(board)
    assert "best of 2 recorded of 4 points (partial search): lr=0.01, dropout=0.0" in md
    assert "1 are a **partial search**" in md
    scale = describe_scale(suite.resolved(), recs)
    assert scale.startswith("**stated-reduced**") and "lr all 2" in scale
    assert "dropout 0.0 (1 of 2: 0.0, 0.5)" in scale


def test_records_of_the_suites_own_point_count_in_a_searched_folder(tmp_path):
    """Records made before the [search] existed (the suite's own point) are read from a folder whose
    resolved suite has the search: same ids, so none is dropped as 'not in suite'."""
    raw = copy.deepcopy(RAW)
    raw.pop("search")
    before = parse_suite(raw)
    old = _records(before, {("lip", 0.005, 0.0): [(0.70, 0.71)] * 3, ("plain", 0.005, 0.0): [(0.5, 0.5)] * 3})
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / records.RESOLVED_FILE).write_text(json.dumps(_suite().resolved(), default=str, sort_keys=True))
    (folder / records.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in old))
    board = lb.load_board(folder)
    assert board.dropped == {} and board.runs == 6
    lip = next(e for e in board.entries if e.row == ("lip",))
    assert lip.search.recorded == 1 and lip.search.partial and lip.search.point == {"lr": 0.005, "dropout": 0.0}
    # the file's axis order survives the sorted keys of suite.resolved.json
    assert lip.search.describe().endswith(": lr=0.005, dropout=0.0")


def test_each_cell_is_chosen_over_its_own_tables_points():
    """[[search]]: `plain` is tuned over lr, `lip` over dropout; each cell counts its own table's points and
    names its point by its own table's axes."""
    raw = copy.deepcopy(RAW)
    raw["search"] = [{"lr": [0.01, 0.005], "when": {"variant": "plain"}, "metric": "val"},
                     {"dropout": [0.0, 0.5], "when": {"variant": "lip"}, "metric": "val"}]
    suite = parse_suite(raw)
    recs = _records(suite, {
        ("plain", 0.01, 0.0): [(0.80, 0.55)] * 3, ("plain", 0.005, 0.0): [(0.70, 0.65)] * 3,
        ("lip", 0.005, 0.0): [(0.60, 0.60)] * 3, ("lip", 0.005, 0.5): [(0.90, 0.75)] * 3,
    })
    by_row = {e.row: e for e in lb.aggregate(suite.resolved(), recs).entries}
    plain, lip = by_row[("plain",)], by_row[("lip",)]
    assert plain.search.points == 2 and not plain.search.partial and abs(plain.summary.mean - 55.0) < 1e-9
    assert plain.search.point == {"lr": 0.01}  # described by its own table's axes
    assert lip.search.points == 2 and not lip.search.partial and abs(lip.summary.mean - 75.0) < 1e-9
    assert lip.search.point == {"dropout": 0.5}
    assert "— best of 2: dropout=0.5" in to_markdown(lb.aggregate(suite.resolved(), recs))
