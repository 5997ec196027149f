"""Benchmarks: declarative suites, stacked multi-seed training, run logs and leaderboards.

>>> from zoo.bench import load_suite, run_suite, write_leaderboard
>>> suite = load_suite("quick", quick=True)
>>> run_suite(suite, "results/quick")            # resumable; one JSON line per finished run
>>> write_leaderboard(["results/quick"], "results/quick/leaderboard")

Command line: ``zoo bench SUITE``, ``zoo train ...``, ``zoo leaderboard ...`` (``zoo --help``).
"""
from zoo.bench.leaderboard import load_board, write_leaderboard
from zoo.bench.records import append_record, read_records
from zoo.bench.runner import run_suite
from zoo.bench.stats import summarize
from zoo.bench.suite import Suite, SuiteError, list_suites, load_suite, parse_suite
from zoo.bench.train import TrainConfig

__all__ = ["load_suite", "parse_suite", "list_suites", "run_suite", "write_leaderboard", "load_board",
           "read_records", "append_record", "summarize", "Suite", "SuiteError", "TrainConfig"]
