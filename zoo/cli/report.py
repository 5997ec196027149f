"""``zoo report [RECORDS_DIR] [--md FILE] [--html FILE] [--notes FILE] [--check | --draft | --todo | --recheck N]``:
the reproduction report from committed run records, with a status per cell."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Optional, Union

from zoo.bench.render.sources import ReportSources
from zoo.cli.args import user_path
from zoo.cli.errors import EXIT_FAILED, EXIT_NOTHING, CliError

#: This repository's reproduction report: where its records, notes and pages live (``zoo report``'s
#: defaults; the report code itself names no path).  ``root``: the checkout holding ``zoo/``.
REPORT_DEFAULTS = ReportSources(records="docs/reproduction/records", notes="docs/reproduction/notes.toml",
                                md="docs/reproduction.md", html="docs/reproduction/index.html",
                                root=Path(__file__).resolve().parents[2])


def report_sources(records: Optional[Union[str, Path]] = None) -> ReportSources:
    """The paths ``zoo report`` names on its pages (this repository's layout).  With ``records``, the
    root is the checkout (or copy of one) holding that folder at the layout's place, so a copy of the
    repository regenerates the same pages; elsewhere, this package's checkout."""
    if records is not None:
        folder, tail = Path(records).resolve(), Path(REPORT_DEFAULTS.records).parts
        if folder.parts[-len(tail):] == tail:
            return dataclasses.replace(REPORT_DEFAULTS, root=Path(*folder.parts[:-len(tail)]))
    return REPORT_DEFAULTS


def register(sub: Any) -> None:
    p = sub.add_parser("report", help="reproduction report (docs/reproduction.md + index.html) from committed "
                                      "run records, with a status per cell (zoo/bench/report/status.py)")
    p.add_argument("records", nargs="?", default=REPORT_DEFAULTS.records, type=user_path,
                   help=f"folder of record folders, one per suite (default {REPORT_DEFAULTS.records})")
    p.add_argument("--md", default=REPORT_DEFAULTS.md, type=user_path, help="Markdown report to write (default %(default)s)")
    p.add_argument("--html", default=REPORT_DEFAULTS.html, type=user_path, help="HTML page to write (default %(default)s)")
    p.add_argument("--notes", default=None, type=user_path,
                   help="notes file: why cells differ / what was tried (default RECORDS/../notes.toml)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the Markdown on disk is out of date or an open cell has no note")
    p.add_argument("--draft", action="store_true",
                   help="write the pages even if open cells have no note yet (marked; exit 1); --check refuses them")
    p.add_argument("--todo", action="store_true",
                   help="write nothing; print the commands filling the paper cells not run, cheapest first")
    p.add_argument("--class", dest="todo_class", choices=("runs-here", "gpu", "data-absent"), default=None,
                   help="with --todo: only this class of cells (default all; data-absent: their raw files are not in the "
                        "records' machine's data mirror)")
    p.add_argument("--max-hours", type=float, default=None,
                   help="with --todo: the cheapest commands adding up to at most this many estimated hours")
    p.add_argument("--out-root", default=None, type=user_path,
                   help="with --todo: add --out OUT_ROOT/<suite> to each command (pipe the list to sh to run it)")
    p.add_argument("--recheck", type=int, default=None, metavar="N",
                   help="write nothing; re-run N committed records drawn at random (cheapest first) in a fresh "
                        "folder and print per record: ids equal, epochs equal, metric bitwise / within tolerance, "
                        "whether its cell's status would change (exit 1 where the determinism contract breaks)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="with --recheck: draw among records whose recorded run fits MAX_MINUTES / N, and start no "
                        "re-run once MAX_MINUTES are spent")
    p.add_argument("--draw-seed", type=int, default=0, help="with --recheck: the seed of the draw (default 0)")
    p.set_defaults(handler=run, prog=p.prog)


def _todo(args: argparse.Namespace) -> int:
    from zoo.bench.report.status import build_report
    from zoo.bench.report.todo import todo
    from zoo.bench.render.missing import todo_lines

    commands = todo(build_report(args.records, args.notes), args.todo_class, args.max_hours)
    if not commands:
        print("zoo report: no paper cell left to run in that selection", file=sys.stderr)
        return EXIT_NOTHING
    print("\n".join(todo_lines(commands, args.out_root)))
    return 0


def _recheck(args: argparse.Namespace) -> int:
    from zoo.bench.recheck import lines, recheck

    if args.recheck < 1:
        raise CliError(f"--recheck takes the number of records to re-run (>= 1), got {args.recheck}")
    outcomes = recheck(args.records, args.recheck, args.max_minutes, args.draw_seed)
    if not outcomes:
        print("zoo report: no committed record to re-run in that budget", file=sys.stderr)
        return EXIT_NOTHING
    print("\n".join(lines(outcomes)))
    return EXIT_FAILED if any(o.breaks_contract for o in outcomes) else 0


def run(args: argparse.Namespace) -> int:
    from zoo.bench.report.errors import MissingNotesError
    from zoo.bench.publish import write_report

    if args.recheck is not None:
        return _recheck(args)
    if args.max_minutes is not None:
        raise CliError("--max-minutes goes with --recheck (zoo report --recheck 10 --max-minutes 20)")
    if args.todo:
        return _todo(args)
    if args.todo_class is not None or args.max_hours is not None or args.out_root is not None:
        raise CliError("--class, --max-hours and --out-root go with --todo (zoo report --todo --class runs-here)")
    try:
        report, problems = write_report(args.records, args.md, args.html, report_sources(args.records),
                                        notes_path=args.notes, check=args.check, draft=args.draft)
    except MissingNotesError as e:
        print(f"zoo report: {e}", file=sys.stderr)
        return EXIT_FAILED
    counts = report.counts()
    print("zoo report: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f" ({len(report.suites)} record folder(s))")
    print("zoo report: findings " + ", ".join(f"{k} {v}" for k, v in report.finding_counts().items()))
    for n in report.unused_notes():
        print(f"zoo report: warning: note #{n.index} of suite {n.suite!r} matches no compared cell of its records "
              f"(when = {n.when}, table = {n.table!r})", file=sys.stderr)
    for suite in report.suites:
        ignored = suite.board.dropped.get("not_in_suite", 0)
        if ignored:  # e.g. records merged from a checkout whose suite resolved differently
            print(f"zoo report: warning: {suite.board.suite}: {ignored} record(s) match no cell of the folder's "
                  f"suite.resolved.json and are left out; copy the suite.resolved.json of the run that wrote them "
                  f"(if the suite file is unchanged) or re-run those cells", file=sys.stderr)
    for p in problems:
        print(f"zoo report: {p}", file=sys.stderr)
    if not args.check:
        print(f"md: {args.md}\nhtml: {args.html}")
    return EXIT_FAILED if problems else 0
