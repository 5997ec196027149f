"""Benchmarks: declarative suites, stacked multi-seed training, run logs and leaderboards.

>>> from zoo.bench import RunOptions, load_suite, run_suite, write_leaderboard
>>> suite = load_suite("quick", quick=True)
>>> run_suite(suite, "results/quick", RunOptions(workers="auto"))   # resumable; one JSON line per finished run
>>> write_leaderboard(["results/quick"], "results/quick/leaderboard")

Command line: ``zoo bench SUITE``, ``zoo train ...``, ``zoo leaderboard ...`` (``zoo --help``).

Layers, imported only downward::

    suite/    suites, keys, the training-config schema, metrics and modes     (no torch)
    plan/     cost model, estimates, shards                                   (no torch)
    store/    run records, results folders, merge                             (no torch)
    run/      run options, modes, executors, the driver (torch; training: zoo.trainer)
    analyze/  leaderboard aggregation: boards, statistics, the best search
              point per cell, records of one cell across devices              (no torch)
    report/   the reproduction report's rules: status against the paper, findings,
              notes bound to the records, the cost of cells not run           (no torch)
    render/   Markdown, CSV/JSON, HTML as strings                             (no IO, no torch)
    publish   writes leaderboards and the report
    recheck   re-runs committed records and compares them (torch)

The names below load their layer on first use (PEP 562), so ``import zoo.bench.suite`` stays torch-free.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_suite": "zoo.bench.suite.load", "parse_suite": "zoo.bench.suite.load", "list_suites": "zoo.bench.suite.load",
    "Suite": "zoo.bench.suite.schema", "SuiteError": "zoo.bench.suite.schema", "TrainConfig": "zoo.trainer.config",
    "read_records": "zoo.bench.store.records", "append_record": "zoo.bench.store.records",
    "summarize": "zoo.bench.analyze.stats", "load_board": "zoo.bench.analyze.board",
    "write_leaderboard": "zoo.bench.publish", "run_suite": "zoo.bench.run.driver", "RunOptions": "zoo.bench.run.options",
}
__all__ = ["load_suite", "parse_suite", "list_suites", "run_suite", "RunOptions", "write_leaderboard", "load_board",
           "read_records", "append_record", "summarize", "Suite", "SuiteError", "TrainConfig"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'zoo.bench' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
