"""The ``zoo`` parser: flags spelled as the Python and TOML keys with their former spellings as hidden
aliases, ``zoo bench calibrate`` a subcommand beside ``zoo bench SUITE``, one module per subcommand."""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from zoo.cli import SUBCOMMANDS, build_parser

#: new spelling -> former spelling, per subcommand (the former still parses, into the same key)
RENAMED = {
    "train": {"--num-layers": "--layers", "--hidden-dim": "--hidden", "--inits": "--init",
              "--transforms": "--transform"},
    "diagnose": {"--num-layers": "--layers", "--hidden-dim": "--hidden", "--inits": "--init"},
    "bench": {"--resume-every": "--checkpoint-every"},
}
TRAIN = ["train", "--model", "gat", "--dataset", "cornell"]
DIAGNOSE = ["diagnose", "gat", "--dataset", "cornell"]


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("argv", [TRAIN, DIAGNOSE])
def test_flags_named_as_the_python_and_toml_keys(argv):
    args = build_parser().parse_args([*argv, "--num-layers", "4", "--hidden-dim", "16", "--inits", "xavier,bal_o"])
    assert (args.num_layers, args.hidden_dim, args.inits) == (4, 16, ["xavier", "bal_o"])


@pytest.mark.parametrize("argv", [TRAIN, DIAGNOSE])
def test_former_spellings_still_parse_into_the_same_keys(argv):
    args = build_parser().parse_args([*argv, "--layers", "4", "--hidden", "16", "--init", "xavier,bal_o"])
    assert (args.num_layers, args.hidden_dim, args.inits) == (4, 16, ["xavier", "bal_o"])
    plain = build_parser().parse_args(argv)
    assert (plain.num_layers, plain.hidden_dim, plain.inits) == (None, None, None)


def test_bench_resume_every_and_its_former_spelling():
    """How often a long group saves its resume state: ``--resume-every``; ``--checkpoint-every`` parses
    into the same key (the driver's ``resume_every``)."""
    for flag in ("--resume-every", "--checkpoint-every"):
        assert build_parser().parse_args(["bench", "quick", flag, "5m"]).resume_every == "5m"
    assert build_parser().parse_args(["bench", "quick"]).resume_every is None


def test_train_transforms_both_spellings_append_to_one_list():
    args = build_parser().parse_args([*TRAIN, "--transforms", "normalize_features", "--transform", "to_undirected"])
    assert args.transforms == ["normalize_features", "to_undirected"]


@pytest.mark.parametrize("command", sorted(RENAMED))
def test_help_shows_only_the_new_spellings(command):
    text = _subparser(command).format_help()
    for new, old in RENAMED[command].items():
        assert new in text
        assert old not in text.replace(new, ""), f"zoo {command} --help shows {old}"


def test_no_hidden_alias_in_any_help():
    """Every suppressed option of every parser stays out of its help and usage line."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        shown = set(p.format_help().replace(",", " ").split())
        for action in p._actions:
            if action.help == argparse.SUPPRESS:
                assert not shown & set(action.option_strings), (name, action.option_strings)


def test_zoo_help_and_bench_help_list_calibrate(capsys):
    from zoo.cli import main

    for argv in (["--help"], ["bench", "--help"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        out = capsys.readouterr().out
        assert e.value.code == 0 and "calibrate" in out, argv
    assert "subcommands:\n  calibrate" in out and "--where" in out and "--quick" in out  # zoo bench --help


def test_calibrate_is_a_subcommand_and_suites_still_run_positionally():
    parser = build_parser()
    cal = parser.parse_args(["bench", "calibrate", "a", "b", "--out", "m.json"])
    assert cal.handler.__module__ == "zoo.cli.bench_calibrate" and cal.records == ["a", "b"]
    assert (cal.out, cal.device, cal.prog) == ("m.json", "cpu", "zoo bench calibrate")
    run = parser.parse_args(["bench", "--quick", "--set", "epochs=2", "quick", "--set", "lr=0.1", "--out", "o"])
    assert run.handler.__module__ == "zoo.cli.bench" and run.suite == "quick" and run.prog == "zoo bench"
    assert run.quick and run.set == [("epochs", 2), ("lr", 0.1)] and run.out == "o"
    path = parser.parse_args(["bench", "calibrate.toml"])
    assert path.suite == "calibrate.toml" and path.handler.__module__ == "zoo.cli.bench"


def test_calibrate_errors_say_how_to_run_a_suite_file_named_calibrate(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["bench", "calibrate", "--quick"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and err.startswith("zoo bench calibrate: error: ")
    assert "to run a suite file named calibrate, give its path: zoo bench ./calibrate.toml" in err


def test_no_shipped_suite_is_named_like_a_bench_subcommand():
    from zoo.bench.suite.load import list_suites

    assert "calibrate" not in list_suites()


def test_bench_options_after_the_suite_are_checked(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "quick", "--quik"])
    assert "zoo bench: error: unrecognized arguments: --quik" in capsys.readouterr().err


def test_one_module_per_subcommand_with_short_functions():
    """Each subcommand module registers its parser and handler; no function over 80 lines."""
    parser = build_parser()
    names = {m.__name__ for m in SUBCOMMANDS}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert build_parser().parse_args([name, *_minimal(name)]).handler.__module__ in names
    folder = Path(SUBCOMMANDS[0].__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 80, f"{path.name}:{node.name} has {length} lines"


def _minimal(name: str) -> list:
    return {"train": ["--model", "gat", "--dataset", "cora"], "bench": ["quick"], "diagnose": ["gat"],
            "merge": ["a", "--out", "b"], "leaderboard": ["a", "--out", "b"]}.get(name, [])
