"""``zoo merge OUT... --out DIR``: shard / slice results folders of one suite as one folder."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from zoo.cli.args import user_path


def register(sub: Any) -> None:
    p = sub.add_parser("merge", help="merge shard / slice results folders of one suite into one folder")
    p.add_argument("results", nargs="+", type=user_path, help="results folders written by `zoo bench --shard I/N --out ...`")
    p.add_argument("--out", required=True, type=user_path, help="new folder for the merged results")
    p.set_defaults(handler=run, prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from zoo.bench.store.merge import merge

    s = merge(args.results, args.out)
    print(f"merged {s.inputs} folder(s) into {s.out}: {s.runs} finished run(s) of {s.total}, "
          f"{s.failed} failed record(s) kept (a re-run retries them)")
    if s.missing_shards:
        print(f"  warning: shard(s) {', '.join(map(str, s.missing_shards))} not among the inputs", file=sys.stderr)
    return 0
