"""``zoo bench SUITE --set KEY=VALUE``: a stated-reduced protocol.

The set values apply to every cell after everything else in the suite, are validated like the
suite file's keys, change the cells' ids (a reduced run never passes for a full one), are stored
in ``suite.resolved.json`` with the values they replaced, and the report / leaderboard say so.
"""
from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest

from zoo.bench import publish
from zoo.bench.analyze import board as lb
from zoo.bench.report import status as rp
from zoo.bench.report.scale import describe_scale
from zoo.bench.render import leaderboard as render_lb
from zoo.bench.render import report as render_rp
from zoo.bench.store import folders
from zoo.cli.report import REPORT_DEFAULTS
from zoo.bench.store.merge import MergeError, merge
from zoo.bench.store.records import SuiteMismatchError, read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import SuiteError
from zoo.bench.suite.settings import describe_settings
from zoo.cli import main
from zoo.cli.args import parse_setting, settings_of
from zoo.cli.bench import default_bench_out
from zoo.cli.errors import CliError
from tests.conftest import tiny_twin_suite

RAW = {
    "suite": {"name": "red"},
    "defaults": {"dataset": "twin", "model": "gat", "hidden_dim": 8, "epochs": 3, "optimizer": "adam",
                 "lr": 0.01},
    "grid": {"num_layers": [1, 2], "init": ["xavier", "bal_o"], "seed": [0, 1]},
    "override": [{"when": {"num_layers": 2}, "lr": 0.02, "warmup_epochs": 2}],
    "quick": {"defaults": {"epochs": 1}, "grid": {"seed": [0]}},
    "leaderboard": {"rows": ["model", "init"], "columns": "num_layers", "metric": "train"},
}


def suite(settings=None, quick=False, raw=RAW):
    return parse_suite(copy.deepcopy(raw), quick=quick, validate_models=False, settings=settings)


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, expected", [
    ("epochs=200", ("epochs", 200)),
    ("lr=0.5", ("lr", 0.5)),
    ("prune_layers=[2,32,64]", ("prune_layers", [2, 32, 64])),
    ("init=bal_o", ("init", "bal_o")),                      # a bare word is a string
    ('dtype="float64"', ("dtype", "float64")),
    ("norm_kwargs={scale = 2.0}", ("norm_kwargs", {"scale": 2.0})),   # TOML inline table
    ('norm_kwargs={"scale": 2.0}', ("norm_kwargs", {"scale": 2.0})),  # JSON object
    (" warmup_epochs = 20", ("warmup_epochs", 20)),
])
def test_values_are_toml_or_json_literals(text, expected):
    assert parse_setting(text) == expected


@pytest.mark.parametrize("text", ["epochs", "=200", "epochs="])
def test_a_setting_needs_key_and_value(text):
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        parse_setting(text)


def test_a_key_given_twice_is_an_error():
    assert settings_of([("epochs", 2), ("lr", 0.1)]) == {"epochs": 2, "lr": 0.1}
    with pytest.raises(CliError, match="--set epochs is given twice"):
        settings_of([("epochs", 2), ("epochs", 3)])


# ----------------------------------------------------------------------------- precedence and validation


def test_set_wins_over_defaults_overrides_and_quick():
    plain = suite()
    assert {c.config["train"]["lr"] for c in plain.cells} == {0.01, 0.02}  # the override by depth
    s = suite({"lr": 0.3, "warmup_epochs": 1, "epochs": 9})
    assert all(c.config["train"]["lr"] == 0.3 and c.config["train"]["warmup_epochs"] == 1
               and c.config["train"]["epochs"] == 9 for c in s.cells)
    q = suite({"epochs": 5}, quick=True)  # over [quick.defaults] epochs = 1
    assert len(q.cells) == 4 and all(c.config["train"]["epochs"] == 5 for c in q.cells)
    other = suite({"heads": 2, "data.k": 3})  # a model option and a dataset option
    assert all(c.config["model"]["kwargs"]["heads"] == 2 and c.config["task"]["options"] == {"k": 3}
               for c in other.cells)


@pytest.mark.parametrize("settings, match", [
    ({"epoch": 2}, r"--set: unknown key 'epoch' \(did you mean 'epochs'"),
    ({"hedas": 2}, r"--set: unknown key 'hedas' \(did you mean 'heads'"),
    ({"epochs": "2oo"}, r"--set epochs: must be int, got '2oo'"),
    ({"optimizer": "adan"}, r"with --set optimizer=adan: unknown optimizer 'adan'"),
])
def test_bad_keys_and_values_are_errors(settings, match):
    with pytest.raises(SuiteError, match=match):
        suite(settings)


@pytest.mark.parametrize("key, value, what", [
    ("seed", 3, "a grid axis"),
    ("num_layers", 4, "a grid axis"),
    ("arch.num_layers", 4, "a grid axis"),
    ("init", "xavier", "a grid axis"),
    ("model", "gatv2", "a leaderboard key"),
    ("dataset", "cora", "a leaderboard key"),  # table_by
    ("variant", "a", "what names an experiment"),
])
def test_keys_that_select_cells_are_refused_pointing_at_where(key, value, what):
    with pytest.raises(SuiteError) as e:
        suite({key: value})
    assert what in str(e.value) and f"--where {key}=" in str(e.value)


def test_a_setting_that_changes_no_cell_is_an_error():
    with pytest.raises(SuiteError, match="--set epochs=3 changes no cell: the suite already has epochs=3"):
        suite({"epochs": 3})


# ----------------------------------------------------------------------------- ids and the resolved suite


def test_reduced_cells_have_their_own_ids_and_groups():
    plain, reduced = suite(), suite({"epochs": 2})
    assert len(reduced.cells) == len(plain.cells)
    assert not {c.id for c in plain.cells} & {c.id for c in reduced.cells}
    assert [c.id for c in suite({"epochs": 2}).cells] == [c.id for c in reduced.cells]  # stable
    assert [c.id for c in suite({"epochs": 4}).cells] != [c.id for c in reduced.cells]
    assert len(reduced.groups()) == len(plain.groups()) == 2  # seeds x inits still stacked per depth


def test_an_integer_for_a_float_trainer_key_is_the_same_cell():
    """`--set loss_threshold=0` parses the integer 0; a suite that writes 0.0 is the same protocol, so the same ids
    (stop 34 re-ran runs that way and their ids differed from the suite's until the value was canonicalised)."""
    written = {**RAW, "defaults": {**RAW["defaults"], "loss_threshold": 0.0, "weight_decay": 1.0}}
    as_set = suite({"loss_threshold": 0, "weight_decay": 1})
    assert [c.id for c in as_set.cells] == [c.id for c in suite(raw=written).cells]
    assert {type(c.config["train"]["loss_threshold"]) for c in as_set.cells} == {float}
    assert {c.config["train"]["epochs"] for c in suite({"epochs": 2}).cells} == {2}  # an int field stays an int


def test_resolved_suite_records_the_set_and_what_it_replaced():
    info = json.loads(json.dumps(suite({"epochs": 2, "warmup_epochs": 1}).resolved()))
    assert info["set"] == {"epochs": 2, "warmup_epochs": 1}
    assert info["set_replaces"] == {"epochs": [3], "warmup_epochs": [0, 2]}
    assert describe_settings(info) == "epochs=2 (suite: 3), warmup_epochs=1 (suite: 0, 2)"
    plain = suite().resolved()
    assert "set" not in plain and "set_replaces" not in plain and describe_settings(plain) == ""


def test_default_out_folder_is_apart_from_the_full_protocol():
    assert default_bench_out(suite(), False) == Path("results/red")
    reduced = default_bench_out(suite({"epochs": 2}), False)
    assert reduced.name.startswith("red-set-") and reduced != default_bench_out(suite({"epochs": 1}), False)
    assert default_bench_out(suite({"epochs": 2}, quick=True), True).name.startswith("red-quick-set-")


# ----------------------------------------------------------------------------- report and leaderboard


def _records(s, keep=lambda c: True):
    return [{"id": c.id, "config": c.config, "metrics": {"train": 0.5}} for c in s.cells if keep(c)]


def test_describe_scale_states_the_reduction():
    s = suite({"epochs": 2, "warmup_epochs": 1})
    info = json.loads(json.dumps(s.resolved()))
    text = describe_scale(info, _records(s))
    assert text.startswith("**stated-reduced** — all 8 runs, at a reduced protocol (zoo bench --set)")
    assert text.endswith("Protocol: reduced with --set epochs=2 (suite: 3), warmup_epochs=1 (suite: 0, 2); "
                         "everything else as in the suite file.")
    part = describe_scale(info, _records(s, keep=lambda c: c.seed == 0))
    assert part.startswith("**stated-reduced** — 4 of the suite's 8 runs, at a reduced protocol")
    lr_only = suite({"lr": 0.5})
    text = describe_scale(json.loads(json.dumps(lr_only.resolved())), _records(lr_only))
    assert "Protocol: reduced with --set lr=0.5 (suite: 0.01, 0.02); epochs 3, everything else" in text
    q = suite({"lr": 0.5}, quick=True)
    text = describe_scale(json.loads(json.dumps(q.resolved())), _records(q))
    assert text.startswith("**quick form**") and "--quick form, reduced with --set lr=0.5" in text
    plain = suite()  # unchanged wording without --set
    assert describe_scale(plain.resolved(), _records(plain)).startswith("**full** — all 8 runs")


def _write_folder(path: Path, s) -> Path:
    path.mkdir(parents=True)
    (path / "suite.resolved.json").write_text(json.dumps(s.resolved()))
    (path / "results.jsonl").write_text("".join(json.dumps({**r, "device": "cpu", "commit": "x"}) + "\n"
                                                for r in _records(s)))
    return path


def test_leaderboard_of_a_reduced_folder_says_so(tmp_path, capsys):
    folder = _write_folder(tmp_path / "r", suite({"epochs": 2}))
    md = render_lb.to_markdown(lb.load_board(folder))
    assert "Reduced protocol (zoo bench --set): epochs=2 (suite: 3)" in md
    assert main(["leaderboard", str(folder), "--out", str(tmp_path / "lb")]) == 0
    assert "Reduced protocol" in (tmp_path / "lb" / "index.html").read_text()
    full = _write_folder(tmp_path / "f", suite())
    assert "Reduced protocol" not in render_lb.to_markdown(lb.load_board(full))


def test_report_renders_a_reduced_folder(tmp_path):
    _write_folder(tmp_path / "records" / "red", suite({"epochs": 2}))
    md = render_rp.to_markdown(rp.build_report(tmp_path / "records", notes_path=tmp_path / "none.toml"), REPORT_DEFAULTS)
    assert "Scale: **stated-reduced** — all 8 runs, at a reduced protocol" in md
    assert "Protocol: reduced with --set epochs=2 (suite: 3)" in md


def test_folders_of_different_sets_do_not_merge(tmp_path):
    a = _write_folder(tmp_path / "a", suite({"epochs": 2}))
    b = _write_folder(tmp_path / "b", suite({"epochs": 1}))
    with pytest.raises(MergeError, match="different suites.*set"):
        merge([a, b], tmp_path / "m")


# ----------------------------------------------------------------------------- runs: resume and mixed folders

TINY = tiny_twin_suite("tiny_set")


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_a_full_run_never_takes_reduced_records_for_done(tmp_path, data_root):
    out = tmp_path / "run"
    reduced = parse_suite(copy.deepcopy(TINY), settings={"epochs": 1})
    assert run_suite(reduced, out, RunOptions(device="cpu", quiet=True, where={"seed": [0]})).ran == 1
    again = run_suite(parse_suite(copy.deepcopy(TINY), settings={"epochs": 1}), out, RunOptions(device="cpu", quiet=True))
    assert again.already_done == 1 and again.ran == 1  # the same --set resumes
    assert all(r["epochs_run"] <= 1 for r in read_records(out))
    before = (out / "suite.resolved.json").read_text()
    full = parse_suite(copy.deepcopy(TINY))
    with pytest.raises(SuiteMismatchError) as e:
        run_suite(full, out, RunOptions(device="cpu", quiet=True))
    msg = str(e.value)
    assert "run with --set epochs=1" in msg and "at the suite's own protocol (no --set)" in msg
    assert "--force-new" in msg and "another --out" in msg
    with pytest.raises(SuiteMismatchError, match="with --set epochs=1.*this run is with --set lr=0.5"):
        run_suite(parse_suite(copy.deepcopy(TINY), settings={"lr": 0.5}), out, RunOptions(device="cpu", quiet=True))
    assert (out / "suite.resolved.json").read_text() == before  # nothing rewritten
    summary = run_suite(full, out, RunOptions(device="cpu", quiet=True, force_new=True))
    assert summary.already_done == 0 and summary.ran == 2
    archived = [p for p in out.iterdir() if p.name.startswith("superseded-")]
    assert len(archived) == 1 and json.loads((archived[0] / "suite.resolved.json").read_text())["set"] == {"epochs": 1}
    assert "set" not in json.loads((out / "suite.resolved.json").read_text())
    with pytest.raises(SuiteMismatchError, match="at the suite's own protocol.*this run is with --set epochs=1"):
        run_suite(reduced, out, RunOptions(device="cpu", quiet=True))


def test_cli_bench_with_set(tmp_path, data_root, capsys):
    path = tmp_path / "tiny_set.toml"
    path.write_text('[suite]\nname = "tiny_set"\n[defaults]\ndataset = "twin"\nmodel = "gat"\nnum_layers = 1\n'
                    'hidden_dim = 8\nepochs = 2\n[grid]\nseed = [0]\n'
                    '[leaderboard]\nrows = ["model"]\ncolumns = "num_layers"\nmetric = "test"\n')
    out = tmp_path / "out"
    assert main(["bench", str(path), "--set", "epochs=1", "--set", "lr=0.02", "--quiet", "--workers", "1",
                 "--out", str(out)]) == 0
    info = json.loads((out / "suite.resolved.json").read_text())
    assert info["set"] == {"epochs": 1, "lr": 0.02} and info["cells"][0]["config"]["train"]["epochs"] == 1
    assert "Reduced protocol (zoo bench --set): epochs=1 (suite: 2), lr=0.02 (suite: 0.005)" in capsys.readouterr().out
    assert main(["bench", str(path), "--set", "seed=3", "--quiet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--where seed=" in err and len(err.strip().splitlines()) == 1
    assert main(["bench", str(path), "--quiet", "--out", str(out)]) == 2  # the full protocol: refused
    assert "--force-new" in capsys.readouterr().err
