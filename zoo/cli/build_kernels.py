"""``zoo build-kernels``: compile the C++ attention kernels now (else: at first use)."""
from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("build-kernels", help="compile the C++ attention kernels now (else: at first use); "
                                             "prints the library's path (zoo/ops/_compiled/build.py)")
    p.set_defaults(handler=run, prog=p.prog)


def run(args: argparse.Namespace) -> int:
    from zoo.ops._compiled.build import build_for_cli

    return build_for_cli()
