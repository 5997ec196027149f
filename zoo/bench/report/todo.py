"""The reproduction's to-do list: every ``zoo bench ... --where ...`` command that fills paper cells
without records, across all suites, cheapest first (the queue a machine works through).

Each :class:`~zoo.bench.report.missing_cost.FillCommand` fills one slice (dataset x depth) of one
suite; slices do not overlap, so running the list top to bottom runs each pending cell once.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from zoo.bench.report.missing_cost import DATA_ABSENT, NEEDS_GPU, RUNS_HERE, FillCommand
from zoo.bench.report.status import Report

#: ``--class`` values: the page's classes, by a short name fit for the command line.
CLASSES = {"runs-here": RUNS_HERE, "gpu": NEEDS_GPU, "data-absent": DATA_ABSENT}


def todo(report: Report, cls: Optional[str] = None, max_hours: Optional[float] = None) -> List[FillCommand]:
    """Fill commands of every suite (with records or not), cheapest first.

    ``cls``: a key of :data:`CLASSES` (``None``: all); ``max_hours``: keep the cheapest commands whose
    estimated CPU time adds up to at most this many hours (``None``: all).
    """
    if cls is not None and cls not in CLASSES:
        raise ValueError(f"unknown class {cls!r}; use one of {', '.join(CLASSES)}")
    commands: List[FillCommand] = [c for s in report.suites for c in s.fill]
    commands += [c for u in report.unrun for c in u["fill"]]
    commands.sort(key=lambda c: (c.seconds, c.command()))
    if cls is not None:
        commands = [c for c in commands if c.cls == CLASSES[cls]]
    return _within(commands, max_hours)


def _within(commands: Sequence[FillCommand], max_hours: Optional[float]) -> List[FillCommand]:
    if max_hours is None:
        return list(commands)
    out, total = [], 0.0
    for c in commands:
        if total + c.seconds > max_hours * 3600:
            break
        out.append(c)
        total += c.seconds
    return out
