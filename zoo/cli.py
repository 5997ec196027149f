"""The ``zoo`` command: list plugins, train one configuration, run suites, export leaderboards.

    zoo list [models|inits|norms|datasets|suites]
    zoo train --model gatv2 --dataset cora --layers 10 --init bal_o --optimizer sgd --lr 0.05 \
              --epochs 5000 --seeds 0-4 [--set heads=8 --set data.undirected=true] [--device cuda]
    zoo bench SUITE [--quick] [--device cuda] [--out DIR] [--quiet] [--where KEY=V1[,V2]]... [--shard I/N]
              [--workers N | --executor ray [--ray-address ADDR] [--gpus-per-group F] [--max-retries N]]
    zoo merge OUT... --out DIR
    zoo leaderboard RESULTS... --out DIR
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

LISTABLE = ("models", "inits", "norms", "datasets", "suites")


def parse_seeds(text: str) -> List[int]:
    """``"0-4"`` -> [0..4]; ``"0,3,7"``; ``"5"``."""
    seeds: List[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                lo, hi = part.split("-", 1)
                if int(hi) < int(lo):
                    raise ValueError
                seeds += list(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 0-4 or 0,1,2; got {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"seeds repeat in {text!r}")
    return seeds


def parse_workers(text: str) -> Any:
    """``--workers``: a number >= 1 or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a number >= 1 or 'auto', got {text!r}")
    return n


def parse_setting(text: str) -> tuple:
    """``key=value`` with a TOML value (``8``, ``0.5``, ``true``, ``"add"``, ``[1, 2]``); bare words are strings."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        from zoo.bench.suite import tomllib

        value = tomllib.loads(f"v = {raw}")["v"]
    except Exception:
        value = raw
    return key.strip(), value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zoo", description="gat-zoo: deep graph attention networks, benchmarks.")
    sub = p.add_subparsers(dest="command", required=True)

    ls = sub.add_parser("list", help="list models, inits, norms, datasets or suites")
    ls.add_argument("what", nargs="?", choices=LISTABLE, default=None)

    tr = sub.add_parser("train", help="train one configuration over several seeds")
    tr.add_argument("--model", required=True)
    tr.add_argument("--dataset", required=True)
    tr.add_argument("--layers", type=int, dest="num_layers")
    tr.add_argument("--hidden", type=int, dest="hidden_dim")
    tr.add_argument("--heads", type=int)
    tr.add_argument("--init")
    tr.add_argument("--norm")
    tr.add_argument("--optimizer", choices=("sgd", "adam", "adamw"))
    tr.add_argument("--lr", type=float)
    tr.add_argument("--weight-decay", type=float, dest="weight_decay")
    tr.add_argument("--epochs", type=int)
    tr.add_argument("--patience", type=int)
    tr.add_argument("--dropout", type=float)
    tr.add_argument("--split")
    tr.add_argument("--transform", action="append", dest="transforms", metavar="NAME",
                    help="dataset transform by name (repeatable), e.g. normalize_features")
    tr.add_argument("--seeds", type=parse_seeds, default=[0])
    tr.add_argument("--dtype", choices=("float32", "float64"))
    tr.add_argument("--set", action="append", type=parse_setting, default=[], metavar="KEY=VALUE",
                    help="any other suite key: model option, dataset option (data.KEY), trainer key")
    tr.add_argument("--device", default=None)
    tr.add_argument("--out", default=None, help="results folder (default results/train/<config hash>)")
    tr.add_argument("--data-root", default=None)
    tr.add_argument("--sequential", action="store_true", help="train seeds one at a time instead of stacked")
    tr.add_argument("--quiet", action="store_true")

    be = sub.add_parser("bench", help="run a benchmark suite (resumable) and write its leaderboard")
    be.add_argument("suite", help="suite name (`zoo list suites`) or path to a .toml file")
    be.add_argument("--quick", action="store_true", help="the suite's small [quick] form")
    be.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    be.add_argument("--out", default=None, help="results folder (default results/<suite>[-quick])")
    be.add_argument("--data-root", default=None)
    be.add_argument("--max-replicas", type=int, default=None, help="cap on replicas trained at once (memory)")
    be.add_argument("--sequential", action="store_true", help="one run at a time (reference / debugging)")
    be.add_argument("--quiet", action="store_true", help="no progress bars (CI)")
    be.add_argument("--no-leaderboard", action="store_true")
    ex = be.add_argument_group("selection and execution (docs/distributed.md)")
    ex.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]",
                    help="run only cells with KEY in the values (repeatable; keys as in the suite, e.g. "
                         "dataset=cornell, num_layers=2,5); ids stay the full suite's")
    ex.add_argument("--shard", default=None, metavar="I/N",
                    help="run shard I of N (1-based): a deterministic, cost-balanced part of the groups "
                         "(job arrays; combine the --out folders with `zoo merge`)")
    ex.add_argument("--executor", choices=("local", "process", "ray"), default="local",
                    help="where groups run: here / in --workers processes (default), or on Ray")
    ex.add_argument("--workers", type=parse_workers, default=1, metavar="N|auto",
                    help="run groups in N worker processes, one torch thread each (auto: one per CPU core on "
                         "CPU, 1 on a GPU); default 1 = in this process, which measured fastest here "
                         "(docs/distributed.md)")
    ex.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="Ray cluster to join (default: start a local Ray instance)")
    ex.add_argument("--cpus-per-group", type=float, default=1.0, metavar="C", help="Ray: CPUs per task (default 1)")
    ex.add_argument("--gpus-per-group", type=float, default=0.0, metavar="F",
                    help="Ray: GPUs per task, a fraction shares one GPU between groups (default 0)")
    ex.add_argument("--max-retries", type=int, default=3, metavar="N",
                    help="Ray: retries of a group whose worker died before it is recorded as failed (default 3)")

    mg = sub.add_parser("merge", help="merge shard / slice results folders of one suite into one folder")
    mg.add_argument("results", nargs="+", help="results folders written by `zoo bench --shard I/N --out ...`")
    mg.add_argument("--out", required=True, help="new folder for the merged results")

    lb = sub.add_parser("leaderboard", help="Markdown/CSV/JSON/HTML leaderboard from results folders")
    lb.add_argument("results", nargs="+")
    lb.add_argument("--out", required=True)
    return p


def _list(what: Optional[str]) -> int:
    import zoo
    from zoo.bench.suite import list_suites

    sections = [what] if what else list(LISTABLE)
    for s in sections:
        if s == "datasets":
            from zoo.datasets import format_datasets_table

            print("datasets:\n" + format_datasets_table())
            continue
        names = {"models": zoo.list_models, "inits": zoo.list_inits, "norms": zoo.list_norms,
                 "suites": list_suites}[s]()
        print(f"{s}: {', '.join(names)}")
    return 0


def _train_suite(args: argparse.Namespace) -> Dict[str, Any]:
    defaults: Dict[str, Any] = {"model": args.model, "dataset": args.dataset}
    for key in ("num_layers", "hidden_dim", "heads", "init", "norm", "optimizer", "lr", "weight_decay", "epochs",
                "patience", "dropout", "split", "transforms", "dtype"):
        v = getattr(args, key)
        if v is not None:
            defaults[key] = v
    for key, value in args.set:
        if key in defaults and key not in ("model", "dataset"):
            raise SystemExit(f"zoo train: {key!r} is given twice (as an option and with --set)")
        defaults[key] = value
    return {"suite": {"name": "train", "title": f"zoo train {args.model} on {args.dataset}"},
            "defaults": defaults, "grid": {"seed": list(args.seeds)}}


def _bench(suite, out: Path, args: argparse.Namespace, leaderboard: bool = True) -> int:
    from zoo.bench.leaderboard import load_board, to_markdown, write_leaderboard
    from zoo.bench.runner import run_suite

    from zoo.bench.executors import make_executor
    from zoo.bench.runner import data_env
    from zoo.bench.selection import parse_shard, parse_where

    where = parse_where(getattr(args, "where", []) or [])
    shard = parse_shard(args.shard) if getattr(args, "shard", None) else None
    name, workers = getattr(args, "executor", "local"), getattr(args, "workers", 1)
    if name == "ray":
        if workers != 1:
            raise ValueError("--workers is for the process executor; with --executor ray the cluster's CPUs set "
                             "the parallelism (--cpus-per-group / --gpus-per-group per task)")
        executor: Any = make_executor("ray", ray_address=args.ray_address, cpus_per_group=args.cpus_per_group,
                                      gpus_per_group=args.gpus_per_group, max_retries=args.max_retries,
                                      env=data_env())
    else:
        executor = name
    summary = run_suite(suite, out, device=args.device, quiet=args.quiet, stacked=not args.sequential,
                        max_replicas=getattr(args, "max_replicas", None), data_root=args.data_root,
                        executor=executor, workers=workers, where=where, shard=shard)
    print(f"{suite.name}: {summary.ran} run(s) done now, {summary.already_done} already done, "
          f"{len(summary.skipped)} skipped, {len(summary.failed)} failed, {summary.diverged} diverged; "
          f"{summary.wall_time_s:.1f} s ({summary.executor}); results in {out}")
    if summary.skipped:
        for reason in sorted(set(summary.skipped.values())):
            print(f"  skipped: {reason}", file=sys.stderr)
    if summary.failed:
        for error in sorted(set(summary.failed.values())):
            print(f"  failed (recorded; a re-run retries it): {error.strip().splitlines()[-1]}", file=sys.stderr)
    if leaderboard:
        paths = write_leaderboard([out], out / "leaderboard")
        print(to_markdown(load_board(out)))
        print(f"leaderboard: {paths['html']}")
    return 1 if summary.failed else 0


def _merge(args: argparse.Namespace) -> int:
    from zoo.bench.merge import merge

    s = merge(args.results, args.out)
    print(f"merged {s.inputs} folder(s) into {s.out}: {s.runs} finished run(s) of {s.total}, "
          f"{s.failed} failed record(s) kept (a re-run retries them)")
    if s.missing_shards:
        print(f"  warning: shard(s) {', '.join(map(str, s.missing_shards))} not among the inputs", file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    from zoo.bench.suite import SuiteError

    try:
        if args.command == "list":
            return _list(args.what)
        if args.command == "bench":
            from zoo.bench.suite import load_suite

            suite = load_suite(args.suite, quick=args.quick)
            out = Path(args.out or f"results/{suite.name}{'-quick' if args.quick else ''}")
            return _bench(suite, out, args, leaderboard=not args.no_leaderboard)
        if args.command == "train":
            from zoo.bench.suite import cell_id, parse_suite

            raw = _train_suite(args)
            suite = parse_suite(raw, source="zoo train")
            out = Path(args.out or f"results/train/{cell_id(raw)[:10]}")
            args.max_replicas = None
            return _bench(suite, out, args)
        if args.command == "merge":
            return _merge(args)
        if args.command == "leaderboard":
            from zoo.bench.leaderboard import write_leaderboard

            paths = write_leaderboard(args.results, args.out)
            for kind, path in paths.items():
                print(f"{kind}: {path}")
            return 0
    except (SuiteError, ValueError, TypeError, FileNotFoundError, RuntimeError) as e:
        print(f"zoo {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 1  # pragma: no cover - argparse enforces a command


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
