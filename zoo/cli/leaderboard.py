"""``zoo leaderboard RESULTS... --out DIR``: Markdown / CSV / JSON / HTML leaderboard from results folders."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from zoo.cli.args import user_path, writable_dir
from zoo.cli.errors import EXIT_NOTHING


def register(sub: Any) -> None:
    p = sub.add_parser("leaderboard", help="Markdown/CSV/JSON/HTML leaderboard from results folders",
                       description="the leaderboard of each results folder (one after another) written to "
                                   "DIR as leaderboard.md, leaderboard.csv, leaderboard.json and index.html")
    p.add_argument("results", nargs="+", type=user_path, metavar="RESULTS",
                   help="results folders written by `zoo bench` / `zoo train` (or the results.jsonl in one)")
    p.add_argument("--out", required=True, type=user_path, metavar="DIR",
                   help="folder to write the leaderboard files into (made if missing)")
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
