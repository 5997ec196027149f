"""``zoo bench SUITE``: run a benchmark suite (resumable) and write its leaderboard; ``zoo bench
calibrate`` (:mod:`zoo.cli.bench_calibrate`) is its subcommand.

    zoo bench SUITE [--quick] [--set KEY=VALUE]... [--device cuda] [--out DIR] [--quiet] [--where KEY=V1[,V2]]...
              [--shard I/N] [--estimate] [--resume-every T]
              [--workers N | --executor ray [--ray-address ADDR] [--gpus-per-group F] [--max-retries N]]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zoo.cli import bench_calibrate
from zoo.cli.args import (SuiteOrSubcommand, add_imports, add_renamed, add_settings, parse_device, parse_workers,
                          settings_of, user_path)
from zoo.cli.errors import CliError
from zoo.cli.runs import run_and_report

HELP = "run a benchmark suite (resumable) and write its leaderboard; `zoo bench calibrate`: fit the cost model"


def register(sub: Any) -> None:
    options = argparse.ArgumentParser(add_help=False)  # what follows SUITE is read by this parser too
    _add_run_options(options)
    _add_execution_options(options)
    commands = {"calibrate": bench_calibrate.parser()}
    listed = "\n".join(f"  {name:<12}{c.description} (zoo bench {name} --help)" for name, c in commands.items())
    p = sub.add_parser("bench", parents=[options], help=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=f"run a benchmark suite (resumable) and write its leaderboard\n\n"
                                   f"subcommands:\n{listed}")
    p.add_argument("suite", action=SuiteOrSubcommand, commands=commands, options=options, metavar="SUITE",
                   help="suite name (`zoo list suites`) or path to a .toml file; or a subcommand (above)")
    p.set_defaults(handler=run, prog=p.prog)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="the suite's small [quick] form")
    add_imports(p)
    add_settings(p, "a stated-reduced protocol: set KEY in every cell after everything else in the suite "
                    "(repeatable; TOML/JSON values, e.g. epochs=200, warmup_epochs=20, prune_layers=[2,32,64]); "
                    "ids change, records and `zoo report` say so; cells are chosen with --where, not --set")
    p.add_argument("--device", type=parse_device, default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--out", default=None, type=user_path,
                   help="results folder (default results/<suite>[-quick][-set-<hash>])")
    p.add_argument("--data-root", default=None, type=user_path)
    p.add_argument("--max-replicas", type=int, default=None, help="cap on replicas trained at once (memory)")
    p.add_argument("--force-new", action="store_true",
                   help="OUT holds another/edited suite's results: move them to OUT/superseded-<time>/ and start afresh")
    p.add_argument("--sequential", action="store_true",
                   help="one run at a time, each trained alone, not stacked with others (reference / debugging)")
    p.add_argument("--cuda-graphs", default="auto", metavar="auto|on|off",
                   help="replay each training epoch as CUDA graphs: auto (default: on a CUDA device where the run "
                        "allows it and a replayed epoch equals an eager one; a group whose graphs fail runs again "
                        "eagerly in a fresh process), on (required), off")
    p.add_argument("--quiet", action="store_true", help="no progress bars (CI)")
    p.add_argument("--no-leaderboard", action="store_true")
    p.add_argument("--save-weights", default="none", metavar="none|best|last",
                   help="keep each run's weights beside its record: best = the selected epoch, last = the final "
                        "state (OUT/weights/<id>.safetensors, ~4 bytes per parameter; zoo.load(OUT, cell=, seed=))")


def _add_execution_options(p: argparse.ArgumentParser) -> None:
    ex = p.add_argument_group("selection and execution (docs/distributed.md)")
    ex.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]",
                    help="run only cells with KEY in the values (repeatable; keys as in the suite, e.g. "
                         "dataset=cornell_npz, num_layers=2,5); ids stay the full suite's")
    ex.add_argument("--shard", default=None, metavar="I/N",
                    help="run shard I of N (1-based): a deterministic, cost-balanced part of the groups "
                         "(job arrays; combine the --out folders with `zoo merge`)")
    ex.add_argument("--executor", default=None, metavar="local|process|ray",
                    help="where groups run: local = in this process, process = in --workers processes, ray = on "
                         "Ray (default: process with --workers auto, local where that is one worker)")
    ex.add_argument("--workers", type=parse_workers, default=None, metavar="N|auto",
                    help="run groups in N worker processes, one torch thread each; 1 = in this process. "
                         "Default auto: one per CPU core, capped by the groups (in this process when that is 1, "
                         "or on a GPU), which measured fastest on a 2-core machine (docs/distributed.md); "
                         "1 with --threads or --executor ray")
    ex.add_argument("--threads", type=int, default=None, metavar="N",
                    help="torch threads for groups run in this process (default 1 on the CPU: small graphs "
                         "gain nothing from more and slow down sharply when cores are shared)")
    ex.add_argument("--estimate", action="store_true",
                    help="run nothing: print per slice the runs, groups, expected epochs and estimated time "
                         "(calibrated cost model) for this executor and workers, and the total")
    ex.add_argument("--estimate-by", default=None, metavar="KEY[,KEY]",
                    help="--estimate: the keys that make a slice (default dataset,num_layers where they vary)")
    add_renamed(ex, "--resume-every", "--checkpoint-every", default=None, metavar="T",
                help="a group training longer than T saves its state in OUT/checkpoints/ and a re-run resumes "
                     "it: 600, 10m, 2h (wall time), 50ep (epochs) or off (default 10m)")
    ex.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="Ray cluster to join (default: start a local Ray instance)")
    ex.add_argument("--cpus-per-group", type=float, default=1.0, metavar="C", help="Ray: CPUs per task (default 1)")
    ex.add_argument("--gpus-per-group", type=float, default=0.0, metavar="F",
                    help="Ray: GPUs per task, a fraction shares one GPU between groups (default 0)")
    ex.add_argument("--max-retries", type=int, default=3, metavar="N",
                    help="Ray: retries of a group whose worker died before it is recorded as failed (default 3)")


def run(args: argparse.Namespace) -> int:
    """``zoo bench SUITE``: load the suite (its --set, --where), then estimate or run it."""
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.selection import parse_where

    suite = load_suite(args.suite, quick=args.quick, settings=settings_of(args.set),
                       where=parse_where(args.where))
    out = Path(args.out) if args.out else default_bench_out(suite, args.quick)
    options = run_options(args)
    if args.estimate:
        from zoo.cli.bench_estimate import estimate_run

        return estimate_run(suite, out, args, options)
    args.bench_out = out  # for the Ctrl-C message
    return run_and_report(suite, out, options, leaderboard=not args.no_leaderboard)


def run_options(args: argparse.Namespace) -> Any:
    """The runner's options from ``zoo bench``'s flags (:class:`~zoo.bench.run.options.RunOptions`
    checks each)."""
    from zoo.bench.plan.shards import parse_shard
    from zoo.bench.run.options import RunOptions
    from zoo.bench.suite.selection import parse_where

    return RunOptions(device=args.device, executor=_executor(args), workers=default_workers(args),
                      threads=args.threads, stacked=not args.sequential, max_replicas=args.max_replicas,
                      where=parse_where(args.where), shard=parse_shard(args.shard) if args.shard else None,
                      data_root=args.data_root, save_weights=args.save_weights, resume_every=args.resume_every,
                      cuda_graphs=args.cuda_graphs, force_new=args.force_new, quiet=args.quiet)


def default_bench_out(suite: Any, quick: bool) -> Path:
    """``results/<suite>[-quick][-set-<hash>]``: a reduced protocol gets its own folder by default
    (the hash of its --set values), so it never meets the full protocol's records."""
    name = f"results/{suite.name}{'-quick' if quick else ''}"
    if suite.settings:
        from zoo.bench.suite.schema import cell_id  # the same content hash as the cells' ids

        name += f"-set-{cell_id(suite.settings)[:8]}"
    return Path(name)


def default_workers(args: argparse.Namespace) -> Any:
    """``--workers`` as given, else ``auto`` (one process per core, capped by the groups; measured
    fastest on a 2-core machine, docs/distributed.md) -- or 1 when ``--threads`` asks for the
    in-process loop or Ray sets the parallelism."""
    check_execution(args)
    if args.workers is not None:
        return args.workers
    if args.executor in ("ray", "local") or args.threads is not None or args.sequential:
        return 1
    return "auto"


def check_execution(args: argparse.Namespace) -> None:
    """Options that contradict each other are refused, not resolved silently one way."""
    workers = args.workers
    if not (workers == "auto" or (isinstance(workers, int) and workers > 1)):
        return
    if args.executor == "local":
        raise CliError(f"--executor local runs the groups in this process, but --workers {workers} asks for worker "
                       f"processes: use --executor process --workers {workers}, or drop --workers")
    if args.sequential:
        raise CliError(f"--sequential trains one run at a time, but --workers {workers} runs several at once: drop "
                       "one of them")


def _executor(args: argparse.Namespace) -> Any:
    """``--executor``: a name the runner knows, or the Ray executor made from the Ray flags."""
    if args.executor != "ray":
        return args.executor or "local"
    from zoo.bench.run.driver import data_env
    from zoo.bench.run.executors import make_executor

    return make_executor("ray", ray_address=args.ray_address, cpus_per_group=args.cpus_per_group,
                         gpus_per_group=args.gpus_per_group, max_retries=args.max_retries, env=data_env())
