"""The ``zoo`` command: list plugins, train one configuration, run suites, export leaderboards.

    zoo list [models|inits|norms|datasets|suites]
    zoo train --model gatv2 --dataset cora --num-layers 10 --inits bal_o --optimizer sgd --lr 0.05 \\
              --epochs 5000 --seeds 0-4 [--set heads=8 --set data.undirected=true] [--device cuda]
    zoo bench SUITE [--quick] [--set KEY=VALUE]... [--device cuda] [--out DIR] [--where KEY=V1[,V2]]... [...]
    zoo bench calibrate RECORDS... --out FILE [--device cpu]
    zoo merge OUT... --out DIR
    zoo leaderboard RESULTS... --out DIR
    zoo report [RECORDS_DIR] [--md FILE] [--html FILE] [--notes FILE] [--check | --draft | --todo]
    zoo diagnose MODEL --dataset D [--num-layers N --inits A,B --norm N1[,N2] --epochs N --out PAGE.html]
    zoo docs [--check]
    zoo build-kernels

One module per subcommand registers its parser and handler (``register(subparsers)``, the handler
as the ``handler`` default); :mod:`zoo.cli.args` holds the argument types and option helpers they
share, :mod:`zoo.cli.errors` the exit codes (docs/reliability.md).  Flags are spelled as the
Python and TOML keys (``--num-layers`` is ``num_layers``); former spellings parse as hidden aliases.
"""
from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn, Optional, Sequence

from zoo._gc import pause_for_startup
from zoo.cli import bench, build_kernels, diagnose, docs, leaderboard, listing, merge, report, train
from zoo.cli.errors import (EXIT_BROKEN_PIPE, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_TERMINATED, CliError, Terminated,
                            os_error, raise_terminated, silence_stdout)

#: the subcommands in the order ``zoo --help`` lists them
SUBCOMMANDS = (listing, train, bench, diagnose, merge, leaderboard, report, docs, build_kernels)


def build_parser() -> argparse.ArgumentParser:
    """The ``zoo`` parser: each subcommand module adds its own."""
    from zoo import __version__

    p = argparse.ArgumentParser(prog="zoo", description="gat-zoo: deep graph attention networks, benchmarks.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    return p


def _recorded(out: Path) -> int:
    """Run records in ``out`` (the ones a resume skips); 0 when the file cannot be read."""
    from zoo.bench.store.records import completed_ids

    try:
        return len(completed_ids(out / "results.jsonl"))
    except Exception:  # noqa: BLE001 - the message must not fail over a corrupt file
        return 0


def _interrupted(args: argparse.Namespace, terminated: bool = False) -> int:
    out = getattr(args, "bench_out", None)
    if out is None:
        print(f"{args.prog}: interrupted", file=sys.stderr)
    else:
        print(f"{args.prog}: interrupted: {_recorded(out)} run(s) recorded in {out}; "
              "run the same command to resume", file=sys.stderr)
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``zoo`` command; returns its exit code (:mod:`zoo.cli.errors`).  Without ``argv`` (the
    ``zoo`` command itself, ``sys.argv``) the process then ends at once (:func:`exit_without_teardown`)."""
    if argv is None:  # the command's own process: no collection until its first group (zoo._gc)
        pause_for_startup()
    code = _run(argv)
    if argv is None:
        exit_without_teardown(code)
    return code


def exit_without_teardown(code: int) -> NoReturn:
    """End the process as a normal exit would, less the interpreter's teardown.

    A process that imported torch and PyG (with them torch's compiler stack) spends about 2 s of CPU
    after its last line in the final garbage collection and module teardown, walking every object
    those imports made (docs/notes/performance.md, "The whole process").  Everything a normal exit
    does before that is done here: other non-daemon threads joined, ``atexit`` handlers run (process
    pools, Ray, loggers), the standard streams flushed."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)


def _run(argv: Optional[Sequence[str]]) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from zoo.bench.suite.schema import SuiteError

    previous = _on_sigterm(raise_terminated)
    try:
        if getattr(args, "imports", None):  # the user's registrations, before any name is looked up
            from zoo._user_modules import import_modules

            import_modules(args.imports)
        return args.handler(args)
    except BrokenPipeError:  # the reader closed the pipe (`zoo list | head -1`): it has what it wanted
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as e:
        return _interrupted(args, terminated=isinstance(e, Terminated))
    except (SuiteError, CliError, ValueError, TypeError, RuntimeError, OSError) as e:
        # OSError: disk full, read-only or vanished folders...: one line, no traceback
        print(f"{args.prog}: error: {os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        _on_sigterm(previous)


def _on_sigterm(handler: Any) -> Any:
    """Install ``handler`` for SIGTERM (main thread only); returns the one it replaced."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)
