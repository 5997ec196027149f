"""``zoo leaderboard RESULTS... --out DIR``: Markdown / CSV / JSON / HTML leaderboard from results folders."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from zoo.cli.args import writable_dir
from zoo.cli.errors import EXIT_NOTHING


def register(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help="Markdown/CSV/JSON/HTML leaderboard from results folders")
    p.add_argument("results", nargs="+")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=run, prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from zoo.bench.analyze.board import dropped_note, load_board
    from zoo.bench.publish import write_leaderboard

    boards = [load_board(r) for r in args.results]
    for r, b in zip(args.results, boards):
        if b.dropped:
            print(f"zoo leaderboard: {r}: {dropped_note(b)}", file=sys.stderr)
    if not any(b.runs for b in boards):
        print(f"zoo leaderboard: nothing to show: no run records in {', '.join(map(str, args.results))}",
              file=sys.stderr)
        return EXIT_NOTHING
    paths = write_leaderboard(args.results, writable_dir(Path(args.out), "--out"))
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    return 0
