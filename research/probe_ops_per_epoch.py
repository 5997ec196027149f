"""Operators per training epoch of a suite slice: what a GPU epoch has to launch.

Runs ``zoo bench SUITE --where ...`` on the CPU at 2 and 4 epochs under a ``TorchDispatchMode``
that counts every aten / zoo op reaching the dispatcher below ``vmap`` (the ops that run, after
the batching rules), and prints the difference per epoch, the views among them (no kernel) and
the most frequent ops.  No timing: counts do not depend on the machine's load.  On a GPU an eager
op costs tens of µs of dispatch and launch whatever its size, so for small graphs the count, not
the arithmetic, sets an epoch's time (docs/notes/performance.md, "First GPU": ~54 µs per launching
op on an H200, inferred from an epoch's time and this count).

    python research/probe_ops_per_epoch.py lipschitz_table1 --where dataset=citeseer \\
        --where num_layers=9 --where variant=gat_lip_code_constlr_missing100
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from typing import Counter, Dict, List

from torch.utils._python_dispatch import TorchDispatchMode

from zoo.cli import main as zoo_main

#: Ops that return a view or metadata only: no kernel is launched for them.
VIEW_OPS = ("view", "_unsafe_view", "permute", "expand", "select", "transpose", "unsqueeze", "squeeze", "slice",
            "detach", "t", "as_strided", "alias", "unbind", "split", "narrow", "reshape", "_reshape_alias")


class OpCounter(TorchDispatchMode):
    """Counts the ops dispatched while it is active, by overload name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))


def count_ops(suite: str, selection: List[str], epochs: int, out: str) -> Counter[str]:
    """Op counts of ``zoo bench suite selection --set epochs=epochs`` on the CPU, one process."""
    counter = OpCounter()
    with counter:
        status = zoo_main(["bench", suite, *selection, "--set", f"epochs={epochs}", "--device", "cpu",
                           "--workers", "1", "--quiet", "--no-leaderboard", "--out", out])
    if status not in (None, 0):
        raise SystemExit(status)  # zoo bench has printed the one-line reason
    return counter.counts


def ops_per_epoch(suite: str, selection: List[str], out_root: str) -> Dict[str, float]:
    """Ops per epoch by name: the counts at 4 epochs minus those at 2, halved (setup and the final
    evaluation cancel out)."""
    short, long = (count_ops(suite, selection, e, f"{out_root}/e{e}") for e in (2, 4))
    return {op: (long[op] - short[op]) / 2 for op in long if long[op] != short[op]}


def is_view(op: str) -> bool:
    return op.split(".")[1] in VIEW_OPS if op.count(".") >= 2 else False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("suite", help="suite name or .toml path")
    p.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]",
                   help="the slice, as for zoo bench (repeatable)")
    p.add_argument("--top", type=int, default=20, help="how many of the most frequent ops to list")
    args = p.parse_args(argv)
    selection = [a for w in args.where for a in ("--where", w)]
    with tempfile.TemporaryDirectory() as tmp:
        per_epoch = ops_per_epoch(args.suite, selection, tmp)
    total = sum(per_epoch.values())
    views = sum(n for op, n in per_epoch.items() if is_view(op))
    print(f"ops per epoch (all replicas of the slice together): {total:.0f}, views {views:.0f}, "
          f"others {total - views:.0f}")
    for op, n in sorted(per_epoch.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{n:8.0f}  {op}{'  (view)' if is_view(op) else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
