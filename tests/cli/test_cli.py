"""The ``zoo`` command line: list, train, bench (with resume) and leaderboard; errors exit 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zoo.cli import main
from zoo.cli.args import parse_seeds


def test_parse_seeds():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3,7") == [3, 7]
    for bad in ("4-0", "a", "1,1"):
        with pytest.raises(Exception):
            parse_seeds(bad)


def test_list(capsys):
    # `zoo list suites` resolves every shipped suite (seconds): its table is tests/bench/plan/test_estimate.py's
    assert main(["list", "inits"]) == 0 and "xavier" in capsys.readouterr().out
    assert main(["list", "models"]) == 0 and "gatv2" in capsys.readouterr().out


def test_train_then_leaderboard(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    out = tmp_path / "run"
    argv = ["train", "--model", "gatdb", "--dataset", "twin", "--num-layers", "1", "--epochs", "5", "--seeds", "0-2",
            "--optimizer", "adam", "--lr", "0.01", "--set", "data.k=4", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "3 run(s) done now" in text and "| gatdb |" in text
    recs = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in recs] == [0, 1, 2] and recs[0]["config"]["task"]["options"] == {"k": 4}
    former = [{"--num-layers": "--layers"}.get(a, a) for a in argv]  # the former spelling: the same cells
    assert main(former) == 0 and "0 run(s) done now, 3 already done" in capsys.readouterr().out
    lb = tmp_path / "lb"
    assert main(["leaderboard", str(out), "--out", str(lb)]) == 0
    assert (lb / "index.html").exists() and (lb / "leaderboard.csv").read_text().startswith("suite,")


def test_train_takes_the_trainer_options(tmp_path, monkeypatch, capsys):
    """--lr-scheduler / --warmup-epochs / --grad-clip-norm / --precision are the suite keys of the same names."""
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    out = tmp_path / "run"
    argv = ["train", "--model", "gat", "--dataset", "twin", "--num-layers", "1", "--epochs", "4", "--quiet",
            "--lr-scheduler", "step", "--set", "lr_scheduler_kwargs={step_size=2}", "--warmup-epochs", "2",
            "--grad-clip-norm", "1", "--precision", "bf16", "--out", str(out)]
    assert main(argv) == 0
    train = json.loads((out / "results.jsonl").read_text().splitlines()[0])["config"]["train"]
    assert (train["lr_scheduler"], train["lr_scheduler_kwargs"], train["warmup_epochs"], train["grad_clip_norm"],
            train["precision"]) == ("step", {"step_size": 2}, 2, 1.0, "bf16")
    assert main([*argv[:-2], "--lr-scheduler", "cosin", "--out", str(tmp_path / "o")]) == 2
    assert "Did you mean 'cosine'" in capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", [
    (["train", "--model", "gta", "--dataset", "twin"], "unknown model 'gta'"),
    (["train", "--model", "gat", "--dataset", "twin", "--set", "hedas=2"], "did you mean 'heads'"),
    (["bench", "quik"], "unknown suite 'quik'. Did you mean 'quick'"),
])
def test_errors_name_the_problem(argv, needle, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "o")] if argv[0] != "bench" else argv) == 2
    assert needle in capsys.readouterr().err


def test_unknown_option_is_rejected():
    proc = subprocess.run([sys.executable, "-m", "zoo", "bench", "quick", "--quik"], capture_output=True, text=True)
    assert proc.returncode == 2 and "unrecognized arguments: --quik" in proc.stderr


def test_the_command_ends_without_the_interpreters_teardown(tmp_path):
    """``zoo`` (main without argv) exits as a normal exit would — atexit handlers run, output flushed,
    its exit code kept — but skips the final teardown (a module global's ``__del__`` never runs)."""
    import subprocess
    import sys

    code = ("import atexit, sys\n"
            "class Teardown:\n"
            "    def __del__(self): print('teardown ran', flush=True)\n"
            "keep = Teardown()\n"
            "atexit.register(lambda: print('atexit ran'))\n"
            f"sys.argv = ['zoo'] + sys.argv[1:]\n"
            "from zoo.cli import main\n"
            "main()\n"
            "print('not reached')\n")
    ok = subprocess.run([sys.executable, "-c", code, "list", "norms"], capture_output=True, text=True)
    assert ok.returncode == 0 and "\n  layernorm" in ok.stdout and "atexit ran" in ok.stdout
    assert "teardown ran" not in ok.stdout and "not reached" not in ok.stdout
    bad = subprocess.run([sys.executable, "-c", code, "bench", str(tmp_path / "missing.toml")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "does not exist" in bad.stderr and "atexit ran" in bad.stdout
