"""Reliability: records are never lost or mixed up, every bad input is one clear line.

Each test reproduces a defect found in a reliability review (its section names the kind); all run
on tiny data (the generated ``twin`` dataset, a few epochs).
"""
from __future__ import annotations

import copy
import errno
import json
import os
import pathlib

import pytest
import torch

import zoo
from zoo.bench.store import records
from zoo.bench.analyze.board import load_board
from zoo.bench.render.leaderboard import to_markdown
from zoo.bench.store.records import CorruptRecordsError, append_record, read_records
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import load_suite, parse_suite
from zoo.bench.suite.schema import SuiteError
from zoo.cli import main
from tests.conftest import tiny_twin_suite

# Under `pytest -n 2 --dist loadgroup` this module runs in one worker: the finished two-seed run, trained once.
pytestmark = pytest.mark.xdist_group("reliability")

TINY = tiny_twin_suite("rel")


def tiny(**defaults):
    raw = copy.deepcopy(TINY)
    raw["defaults"].update(defaults)
    return raw


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished run of the 2-seed TINY suite (copied by tests that alter it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    old = os.environ.get("ZOO_DATA")
    os.environ["ZOO_DATA"] = str(out.parent / "data")
    try:
        run_suite(parse_suite(copy.deepcopy(TINY)), out, RunOptions(device="cpu", quiet=True))
    finally:
        if old is None:
            os.environ.pop("ZOO_DATA")
        else:
            os.environ["ZOO_DATA"] = old
    return out


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    dst.mkdir(parents=True)
    for name in ("results.jsonl", "suite.resolved.json"):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


# --------------------------------------------------------------------------- what the leaderboard pools


def test_leaderboard_drops_duplicate_and_foreign_records(finished, tmp_path):
    """A duplicated line is counted once; a record of a cell not in the suite is left out."""
    out = _copy(finished, tmp_path / "run")
    lines = (out / "results.jsonl").read_text().splitlines()
    foreign = json.loads(lines[0])
    foreign["id"] = "0123456789abcdef"
    foreign["metrics"]["test"] = 0.0
    with open(out / "results.jsonl", "a") as fh:
        fh.write(lines[0] + "\n" + json.dumps(foreign) + "\n")
    board = load_board(out)
    assert board.runs == 2 and [e.summary.n for e in board.entries] == [2]
    assert board.dropped == {"duplicate": 1, "not_in_suite": 1}
    assert "1 duplicate record(s)" in to_markdown(board) and "not in suite 'rel'" in to_markdown(board)


def test_changed_suite_into_existing_out_is_refused(finished, tmp_path, data_root):
    """An edited suite run into a used --out is refused (nothing rewritten), or kept apart
    with force_new; an extension (more seeds) resumes."""
    out = _copy(finished, tmp_path / "run")
    before = (out / "suite.resolved.json").read_text()
    edited = parse_suite(tiny(lr=0.02))
    with pytest.raises(RuntimeError, match="edited suite.*--force-new"):
        run_suite(edited, out, RunOptions(device="cpu", quiet=True))
    assert (out / "suite.resolved.json").read_text() == before
    summary = run_suite(edited, out, RunOptions(device="cpu", quiet=True, force_new=True))
    assert summary.ran == 2 and summary.already_done == 0
    archived = [p for p in out.iterdir() if p.name.startswith("superseded-")]
    assert len(archived) == 1 and len(read_records(archived[0] / "results.jsonl")) == 2
    more = copy.deepcopy(tiny(lr=0.02))
    more["grid"]["seed"] = [0, 1, 2]
    summary = run_suite(parse_suite(more), out, RunOptions(device="cpu", quiet=True))
    assert summary.ran == 1 and summary.already_done == 2 and load_board(out).runs == 3


def test_cli_refuses_other_suite_in_out(finished, tmp_path, data_root, capsys):
    """Through the CLI: one line naming the fix, exit 2."""
    out = _copy(finished, tmp_path / "run")
    argv = ["train", "--model", "gat", "--dataset", "twin", "--epochs", "2", "--quiet", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "another suite" in err and "--force-new" in err and len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- disk full


def test_short_write_is_rolled_back(tmp_path, monkeypatch):
    """A short write (disk full) leaves the file as it was and says the run is not recorded."""
    path = tmp_path / "results.jsonl"
    append_record(path, {"id": "a", "x": 1})
    size = path.stat().st_size
    real_write = os.write

    def short_write(fd, data):
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(records.os, "write", short_write)
    with pytest.raises(OSError, match="run b finished but was NOT recorded.*rolled back"):
        append_record(path, {"id": "b", "x": "y" * 100})
    monkeypatch.setattr(records.os, "write", real_write)
    assert path.stat().st_size == size and [r["id"] for r in read_records(path)] == ["a"]
    append_record(path, {"id": "b"})
    assert [r["id"] for r in read_records(path)] == ["a", "b"]


def test_disk_full_during_a_suite_is_one_line_and_resumable(tmp_path, data_root, monkeypatch, capsys):
    """End to end: ENOSPC while recording -> exit 2, one line, no partial line; a re-run completes."""
    out = tmp_path / "run"
    real_write = os.write

    def enospc(fd, data):
        real_write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records.os, "write", enospc)
    argv = ["train", "--model", "gat", "--dataset", "twin", "--num-layers", "1", "--hidden-dim", "8", "--epochs", "2",
            "--seeds", "0-1", "--quiet", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "NOT recorded" in err and "No space left on device" in err and len(err.strip().splitlines()) == 1
    assert read_records(out) == []
    monkeypatch.setattr(records.os, "write", real_write)
    assert main(argv) == 0 and len(read_records(out)) == 2


# --------------------------------------------------------------------------- filesystem errors


def _train_argv(*extra):
    return ["train", "--model", "gat", "--dataset", "twin", "--num-layers", "1", "--epochs", "1", "--quiet", *extra]


@pytest.mark.parametrize("flag", ["--out", "--data-root"])
@pytest.mark.parametrize("where", ["file", "below_file", "read_only"])
def test_unusable_folders_are_one_line(flag, where, tmp_path, data_root, monkeypatch, capsys):
    """--out / --data-root that is a file, below a file or read-only: one line, exit 2."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = {"file": afile, "below_file": afile / "sub", "read_only": tmp_path / "ro" / "sub"}[where]
    if where == "read_only":  # root ignores chmod: simulate a read-only mount
        real_mkdir = pathlib.Path.mkdir

        def mkdir(self, *a, **k):
            if str(self).startswith(str(tmp_path / "ro")):
                raise OSError(errno.EROFS, "Read-only file system", str(self))
            return real_mkdir(self, *a, **k)

        monkeypatch.setattr(pathlib.Path, "mkdir", mkdir)
    argv = _train_argv(flag, str(target)) + ([] if flag == "--out" else ["--out", str(tmp_path / "o")])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag in err and str(target) in err
    assert {"file": "is a file", "below_file": "which is a file", "read_only": "read-only"}[where] in err


def test_leaderboard_out_that_is_a_file(finished, tmp_path, capsys):
    """`zoo leaderboard --out FILE` is one line, exit 2."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["leaderboard", str(finished), "--out", str(afile)]) == 2
    assert "--out" in capsys.readouterr().err and afile.read_text() == "x"


# --------------------------------------------------------------------------- validated at load


@pytest.mark.parametrize("change,needle", [
    ({"grid": {"seed": [0], "lr": [0.01, -1]}}, "lr must be > 0"),
    ({"override": [{"when": {"seed": 1}, "split": "publik"}]}, "unknown split 'publik'"),
    ({"defaults": {"betas": [0.9]}}, "betas must be two numbers"),
    ({"defaults": {"batch_size": -1}}, "batch_size must be >= 0"),
    ({"defaults": {"momentum": -0.5}}, "momentum must be >= 0"),
    ({"defaults": {"betas": [0.9, 1.0]}}, "betas must be two numbers in \\[0, 1\\)"),
    ({"defaults": {"betas": [-0.1, 0.9]}}, "betas must be two numbers in \\[0, 1\\)"),
    ({"defaults": {"warmup_epochs": -1}}, "warmup_epochs must be >= 0"),
    ({"defaults": {"lr": float("nan")}}, "lr must be a number, got nan"),
    ({"defaults": {"num_layers": True}}, "num_layers must be a positive integer, got True"),
    ({"defaults": {"hidden_dim": 0}}, "hidden_dim must be a positive integer, got 0"),
    ({"defaults": {"hidden_dim": "64"}}, "hidden_dim must be a positive integer, got '64'"),
    ({"defaults": {"heads": 2.5}}, "heads must be a positive integer, got 2.5"),
    ({"defaults": {"split": 3}}, "split=3 is out of range"),
    ({"leaderboard": {"rows": ["model", "depth"]}}, "rows names 'depth', which is not a cell key"),
    ({"leaderboard": {"columns": "layers"}}, "columns names 'layers'.*did you mean 'num_layers'"),
])
def test_bad_values_fail_at_load_for_every_cell(change, needle):
    """Every cell (grid points, overrides) is validated before anything trains."""
    raw = copy.deepcopy(TINY)
    for table, value in change.items():
        if table == "defaults":
            raw["defaults"].update(value)
        elif table == "leaderboard":
            raw["leaderboard"].update(value)
        else:
            raw[table] = value
    with pytest.raises(SuiteError, match=needle):
        parse_suite(raw)


def test_cli_lr_nan_fails_before_training(tmp_path, data_root, capsys):
    """`--lr nan` is refused at load (it used to train, then fail writing JSON)."""
    out = tmp_path / "o"
    assert main(_train_argv("--lr", "nan", "--out", str(out))) == 2
    assert "lr must be a number, got nan" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()


def test_max_replicas_must_be_positive(tmp_path, data_root, capsys):
    """--max-replicas -1 ran nothing and exited 0."""
    assert main(["bench", "quick", "--quick", "--max-replicas", "-1", "--out", str(tmp_path / "cli")]) == 2
    assert "max_replicas must be a positive integer (or unset), got -1" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()  # refused before anything is written
    with pytest.raises(ValueError, match="max_replicas must be a positive integer"):
        RunOptions(device="cpu", quiet=True, max_replicas=-1)


@pytest.mark.parametrize("kwargs,needle", [
    ({"num_layers": True}, "num_layers must be a positive integer, got True"),
    ({"hidden_dim": 0}, "hidden_dim must be a positive integer, got 0"),
    ({"out_dim": 0}, "out_dim must be a positive integer, got 0"),
    ({"in_dim": -5}, "in_dim must be a positive integer, got -5"),
    ({"hidden_dim": "64"}, "hidden_dim must be a positive integer, got '64'"),
    ({"heads": 2.5}, "heads must be a positive integer, got 2.5"),
    ({"dropout": "0.5"}, "dropout must be a number"),
])
@pytest.mark.parametrize("name", ["gat", "gatv2", "graph_transformer"])
def test_build_rejects_wrong_typed_options(name, kwargs, needle):
    """Wrong-typed or zero sizes are named (not a raw torch/format error)."""
    options = {"in_dim": 4, "out_dim": 2, **kwargs}
    with pytest.raises(ValueError, match=needle):
        zoo.build(name, **options)


# --------------------------------------------------------------------------- messages


def test_binary_file_or_directory_as_suite(tmp_path):
    """A binary file / a directory given as the suite."""
    binary = tmp_path / "suite.toml"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(SuiteError, match="not a text"):
        load_suite(binary)
    with pytest.raises(SuiteError, match="is a directory, not a suite file"):
        load_suite(tmp_path)


def test_missing_leaderboard_path_is_named(tmp_path, capsys):
    """The missing path itself is named (not its parent)."""
    missing = tmp_path / "nope"
    assert main(["leaderboard", str(missing), "--out", str(tmp_path / "lb")]) == 2
    assert f"{missing} does not exist" in capsys.readouterr().err


def test_corrupt_resolved_suite_is_named(finished, tmp_path, data_root):
    """A corrupt suite.resolved.json is named, by the leaderboard and by the runner."""
    out = _copy(finished, tmp_path / "run")
    (out / "suite.resolved.json").write_text('{"name": "rel", "cel')
    with pytest.raises(CorruptRecordsError, match=f"{out}/suite.resolved.json is corrupt"):
        load_board(out)
    with pytest.raises(CorruptRecordsError, match="suite.resolved.json is corrupt"):
        run_suite(parse_suite(copy.deepcopy(TINY)), out, RunOptions(device="cpu", quiet=True))


def test_record_without_config_names_file_and_line(finished, tmp_path):
    """A record without `config` names the file and line (was a KeyError traceback)."""
    out = _copy(finished, tmp_path / "run")
    lines = (out / "results.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    del rec["config"]
    lines[1] = json.dumps(rec)
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptRecordsError, match=r"results.jsonl:2: record \w+ has no 'config'"):
        load_board(out)


def _registered():
    return zoo.list_models()


@pytest.mark.parametrize("name", _registered())
def test_every_model_handles_empty_graphs_and_rejects_bad_features(name):
    """0-node graphs give a (0, out_dim) output (five models crashed); wrong feature width /
    dtype is a clear error from the model, not a raw torch error."""
    from tests.conftest import small_kwargs

    kwargs = small_kwargs(name)
    model = zoo.build(name, **kwargs).eval()
    empty = torch.empty(2, 0, dtype=torch.long)
    out = model(empty, torch.zeros(0, kwargs["in_dim"]))
    assert out.shape == (0, kwargs["out_dim"])
    edges = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match=f"in_dim={kwargs['in_dim']} features, got {kwargs['in_dim'] + 1}"):
        model(edges, torch.zeros(2, kwargs["in_dim"] + 1))
    with pytest.raises(TypeError, match="must be floating point, got dtype torch.int64"):
        model(edges, torch.zeros(2, kwargs["in_dim"], dtype=torch.long))
    with pytest.raises(TypeError, match="dtype torch.float64 but the model's parameters are torch.float32"):
        model(edges, torch.zeros(2, kwargs["in_dim"], dtype=torch.float64))
    x = torch.zeros(2, kwargs["in_dim"])
    x[1, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN/inf value"):
        model(edges, x)


# --------------------------------------------------------------------------- exit codes


def test_nothing_ran_exits_3(tmp_path, monkeypatch, capsys):
    """A suite whose only dataset is missing said "0 runs" and exited 0."""
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZOO_DATA_MIRROR", str(tmp_path / "empty_mirror"))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    (tmp_path / "empty_mirror").mkdir()
    out = tmp_path / "o"
    assert main(["train", "--model", "gat", "--dataset", "cora", "--epochs", "1", "--quiet", "--out", str(out)]) == 3
    assert "nothing ran" in capsys.readouterr().err
    assert main(["leaderboard", str(out), "--out", str(tmp_path / "lb")]) == 3
    assert "nothing to show" in capsys.readouterr().err


# --------------------------------------------------------------------------- NaN/inf inputs


def test_nan_features_raise_once_per_tensor_with_opt_outs(monkeypatch):
    """NaN/inf in node features raise; the scan runs once per tensor (version-checked);
    check_inputs=False and ZOO_CHECK_INPUTS=0 switch it off."""
    edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
    model = zoo.build("gat", in_dim=3, out_dim=2, hidden_dim=4)
    with pytest.raises(ValueError, match=r"NaN/inf value\(s\) \(first at row 0, column 2: nan"):
        model(edges, torch.tensor([[0.0, 1.0, float("nan")], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    x = torch.randn(3, 3)
    calls = []
    real = torch.isfinite
    monkeypatch.setattr(torch, "isfinite", lambda t: calls.append(1) or real(t))
    model(edges, x)
    model(edges, x)
    assert len(calls) == 1  # cached by identity + version
    x[2, 1] = float("inf")  # in place: the version counter moves, so it is scanned again
    with pytest.raises(ValueError, match=r"1 NaN/inf value\(s\) \(first at row 2, column 1"):
        model(edges, x)
    assert len(calls) > 1  # scanned again
    model(edges, torch.full((3, 3), 3e38))  # finite values whose sum overflows are not flagged
    quiet = zoo.build("gat", in_dim=3, out_dim=2, hidden_dim=4, check_inputs=False)
    assert not torch.isfinite(quiet(edges, x)).all()
    monkeypatch.setenv("ZOO_CHECK_INPUTS", "0")
    model(edges, x)


def test_stacked_training_with_input_checks_still_matches(data_root):
    """The check runs inside vmap'd (stacked) training: grouped == one-at-a-time still holds."""
    a = run_suite(parse_suite(copy.deepcopy(TINY)), data_root.parent / "a", RunOptions(device="cpu", quiet=True))
    b = run_suite(parse_suite(copy.deepcopy(TINY)), data_root.parent / "b",
                  RunOptions(device="cpu", quiet=True, stacked=False))
    assert a.ran == b.ran == 2
    ra = {r["id"]: r["metrics"] for r in read_records(data_root.parent / "a")}
    rb = {r["id"]: r["metrics"] for r in read_records(data_root.parent / "b")}
    assert ra.keys() == rb.keys()
    for k in ra:
        assert ra[k]["test"] == pytest.approx(rb[k]["test"], abs=1e-6)
