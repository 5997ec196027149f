"""The command as a new user meets it: contradictory options refused, a file where a folder is meant, the
leaderboard's help, diagnose on a task of many graphs — one line each."""
from __future__ import annotations

import pytest

from zoo.cli import main


@pytest.mark.parametrize("extra, message", [
    (["--executor", "local", "--workers", "2"], "--executor local runs the groups in this process, but --workers 2 "
                                                "asks for worker processes: use --executor process --workers 2"),
    (["--sequential", "--workers", "2"], "--sequential trains one run at a time, but --workers 2 runs several at once"),
])
def test_contradictory_execution_options_are_refused(tmp_path, capsys, extra, message):
    assert main(["bench", "quick", "--quiet", "--out", str(tmp_path / "o"), *extra]) == 2
    assert capsys.readouterr().err.strip() == f"zoo bench: error: {message}" + (
        ", or drop --workers" if "local" in extra else ": drop one of them")
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_file_given_as_results_is_named(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["leaderboard", str(afile), "--out", str(tmp_path / "lb")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"zoo leaderboard: error: {afile} is a file, not a results folder; pass a folder written by "
                   "`zoo bench` (or the results.jsonl in it)")


def test_the_leaderboard_help_describes_its_arguments(capsys):
    with pytest.raises(SystemExit):
        main(["leaderboard", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "results folders written by `zoo bench`" in text and "folder to write the leaderboard files into" in text


def test_diagnose_on_a_task_of_many_graphs_is_refused_with_a_cli_fix(tmp_path, capsys):
    assert main(["diagnose", "gat", "--dataset", "twin", "--epochs", "1", "--out", str(tmp_path / "d.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("zoo diagnose: error: diagnosis reads every layer's energies and attention over one graph, but "
                   "twin is an inductive task of many graphs: diagnose on a transductive dataset (e.g. cora, cornell)")
    assert "LayerRecorder" not in err  # no Python-only fix
