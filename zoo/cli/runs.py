"""Run a suite from the command line and say what happened: where ``zoo bench`` and ``zoo train``
end, each with the :class:`~zoo.bench.run.options.RunOptions` it built from its own flags."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from zoo.cli.args import writable_dir
from zoo.cli.errors import EXIT_FAILED, EXIT_NOTHING


def run_and_report(suite: Any, out: Path, options: Any, leaderboard: bool = True) -> int:
    """Run ``suite`` into ``out`` (:func:`zoo.bench.run.driver.run_suite`), print the summary and
    the leaderboard; the exit code (0, 1: some failed, 3: nothing ran)."""
    from zoo.bench.run.driver import run_suite

    writable_dir(out, "--out")
    if options.data_root is not None:
        writable_dir(Path(options.data_root), "--data-root", probe=False)
    elif os.environ.get("ZOO_DATA"):  # the same check for the environment's data root, before any run
        writable_dir(Path(os.environ["ZOO_DATA"]).expanduser(), "$ZOO_DATA", probe=False)
    summary = run_suite(suite, out, options)
    code = _report_summary(suite, summary, out)
    if leaderboard and summary.ran + summary.already_done > 0:
        _write_leaderboard(out)
    return code


def _report_summary(suite: Any, summary: Any, out: Path) -> int:
    """Print what the run did; the exit code it makes (0, 1: some failed, 3: nothing ran)."""
    print(f"{suite.name}: {summary.ran} run(s) done now, {summary.already_done} already done, "
          f"{len(summary.skipped)} skipped, {len(summary.failed)} failed, {summary.diverged} diverged; "
          f"{summary.wall_time_s:.1f} s ({summary.executor}); results in {out}")
    for reason in sorted(set(summary.skipped.values())):
        print(f"  skipped: {reason}", file=sys.stderr)
    for error in sorted(set(summary.failed.values())):
        print(f"  failed (recorded; a re-run retries it): {error.strip().splitlines()[-1]}", file=sys.stderr)
    if summary.ran + summary.already_done == 0:
        if summary.failed:
            print(f"zoo: no run of {suite.name} finished: {len(summary.failed)} failed (see above)", file=sys.stderr)
            return EXIT_FAILED
        print(f"zoo: nothing ran: none of the {summary.total} run(s) of {suite.name} could start "
              "(see 'skipped' above); nothing was recorded", file=sys.stderr)
        return EXIT_NOTHING
    return EXIT_FAILED if summary.failed else 0


def _write_leaderboard(out: Path) -> None:
    from zoo.bench.analyze.board import load_board
    from zoo.bench.publish import write_leaderboard
    from zoo.bench.render.leaderboard import to_markdown

    paths = write_leaderboard([out], out / "leaderboard")
    print(to_markdown(load_board(out)))
    print(f"leaderboard: {paths['html']}")
