"""The ``zoo`` command: list plugins, train one configuration, run suites, export leaderboards.

    zoo list [models|inits|norms|datasets|suites]
    zoo train --model gatv2 --dataset cora --layers 10 --init bal_o --optimizer sgd --lr 0.05 \
              --epochs 5000 --seeds 0-4 [--set heads=8 --set data.undirected=true] [--device cuda]
    zoo bench SUITE [--quick] [--set KEY=VALUE]... [--device cuda] [--out DIR] [--quiet] [--where KEY=V1[,V2]]...
              [--shard I/N] [--estimate] [--checkpoint-every T]
              [--workers N | --executor ray [--ray-address ADDR] [--gpus-per-group F] [--max-retries N]]
    zoo bench calibrate RECORDS... --out FILE [--device cpu]
    zoo merge OUT... --out DIR
    zoo leaderboard RESULTS... --out DIR
    zoo report [RECORDS_DIR] [--md FILE] [--html FILE] [--notes FILE] [--check | --draft]
    zoo diagnose MODEL --dataset D [--layers N --init A,B --norm N1[,N2] --epochs N --out PAGE.html]

Exit codes: 0 success; 1 some runs failed (recorded as failed; a re-run retries them); 2 an error
(bad input, unusable folder, corrupt file: one line on stderr); 3 nothing to do (no run recorded:
every dataset missing, or an empty leaderboard).  See
docs/reliability.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from zoo._toml import tomllib
from zoo.bench.render.report import ReportSources

#: This repository's reproduction report: where its records, notes and pages live (``zoo report``'s
#: defaults; the report code itself names no path).  ``root``: the checkout holding ``zoo/``.
REPORT_DEFAULTS = ReportSources(records="docs/reproduction/records", notes="docs/reproduction/notes.toml",
                                md="docs/reproduction.md", html="docs/reproduction/index.html",
                                root=Path(__file__).resolve().parents[1])


def report_sources(records: "Optional[str | Path]" = None) -> ReportSources:
    """The paths ``zoo report`` names on its pages (this repository's layout).  With ``records``, the
    root is the checkout (or copy of one) holding that folder at the layout's place, so a copy of the
    repository regenerates the same pages; elsewhere, this package's checkout."""
    if records is not None:
        folder, tail = Path(records).resolve(), Path(REPORT_DEFAULTS.records).parts
        if folder.parts[-len(tail):] == tail:
            return dataclasses.replace(REPORT_DEFAULTS, root=Path(*folder.parts[:-len(tail)]))
    return REPORT_DEFAULTS

LISTABLE = ("models", "inits", "norms", "datasets", "suites")
EXIT_FAILED = 1     # some runs failed (recorded as failed; a re-run retries them)
EXIT_ERROR = 2      # bad input, unusable folder, corrupt file
EXIT_NOTHING = 3    # nothing ran / nothing to show
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)
EXIT_BROKEN_PIPE = 141  # the output's reader went away (128 + SIGPIPE, as shells report it)


class CliError(Exception):
    """A user error the CLI reports as one line."""


def parse_device(text: str) -> str:
    """``cpu``, ``cuda``, ``cuda:N`` (or another device torch knows, e.g. ``mps``), checked here: torch's
    own error for ``gpu`` lists twenty device types."""
    import torch

    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use cpu, cuda or cuda:N (e.g. cuda:1)") from None
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def writable_dir(path: Path, flag: str, probe: bool = True) -> Path:
    """Create ``path`` if needed and check that it is a folder we can write into (one clear error if not).

    ``probe=False`` (the data root) skips the write test of an existing folder: a read-only data
    root that already holds every dataset is fine, and a write it would need fails as one line.
    """
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                where = "is a file" if p == path else f"is below {p}, which is a file"
                raise CliError(f"{flag} {path} {where}, not a folder; choose a folder path")
            break
    try:
        path.mkdir(parents=True, exist_ok=True)
        if probe:
            with tempfile.TemporaryFile(dir=path):
                pass
    except OSError as e:
        why = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e))
        raise CliError(f"{flag} {path} is not a writable folder ({why}); choose another {flag}") from None
    return path


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail on the closed pipe."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured): nothing to flush there
        pass


def _os_error(e: OSError) -> str:
    if not e.strerror:  # raised with a full message (ours), not by the OS
        return str(e)
    if e.filename is None:  # a full disk or a closed pipe names no file: "No space left on device: None"
        return e.strerror
    return f"{e.strerror}: {e.filename}" + (f" -> {e.filename2}" if e.filename2 else "")


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
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"--workers takes a number >= 1 or 'auto', got {text!r}") from None


def default_workers(args: argparse.Namespace) -> Any:
    """``--workers`` as given, else ``auto`` (one process per core, capped by the groups; measured
    fastest on a 2-core machine, docs/distributed.md) -- or 1 when ``--threads`` asks for the
    in-process loop or Ray sets the parallelism."""
    given = getattr(args, "workers", None)
    if given is not None:
        return given
    if getattr(args, "executor", "local") == "ray" or getattr(args, "threads", None) is not None:
        return 1
    return "auto"


def parse_setting(text: str) -> tuple:
    """``key=value`` with a TOML or JSON value (``8``, ``0.5``, ``true``, ``"add"``, ``[1, 2]``,
    ``{"k": 1}``); bare words are strings."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip() or not raw.strip():
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE, got {text!r} (e.g. --set epochs=200)")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except Exception:
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw.strip()
    return key.strip(), value


def settings_of(pairs: Sequence[tuple]) -> Dict[str, Any]:
    """``zoo bench --set`` pairs -> ``{key: value}`` (a key given twice is an error)."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CliError(f"--set {key} is given twice ({key}={out[key]!r} and {key}={value!r}); give it once")
        out[key] = value
    return out


def default_bench_out(suite: Any, quick: bool) -> Path:
    """``results/<suite>[-quick][-set-<hash>]``: a reduced protocol gets its own folder by default
    (the hash of its --set values), so it never meets the full protocol's records."""
    name = f"results/{suite.name}{'-quick' if quick else ''}"
    if suite.settings:
        from zoo.bench.suite.schema import cell_id  # the same content hash as the cells' ids

        name += f"-set-{cell_id(suite.settings)[:8]}"
    return Path(name)


def _parser() -> argparse.ArgumentParser:
    from zoo import __version__

    p = argparse.ArgumentParser(prog="zoo", description="gat-zoo: deep graph attention networks, benchmarks.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    ls = sub.add_parser("list", help="list models, inits, norms, datasets or suites")
    ls.add_argument("what", nargs="?", choices=LISTABLE, default=None)

    tr = sub.add_parser("train", help="train one configuration over several seeds")
    tr.add_argument("--model", required=True)
    tr.add_argument("--dataset", required=True)
    tr.add_argument("--layers", type=int, dest="num_layers")
    tr.add_argument("--hidden", type=int, dest="hidden_dim")
    tr.add_argument("--heads", type=int)
    tr.add_argument("--init", help="init plugin; A,B trains each init (x seeds) as replicas side by side")
    tr.add_argument("--norm")
    tr.add_argument("--optimizer", choices=("sgd", "adam", "adamw"))
    tr.add_argument("--lr", type=float)
    tr.add_argument("--weight-decay", type=float, dest="weight_decay")
    tr.add_argument("--epochs", type=int)
    tr.add_argument("--patience", type=int)
    tr.add_argument("--lr-scheduler", dest="lr_scheduler",
                    help="none, plateau, step, multistep, exponential, cosine (options: --set lr_scheduler_kwargs={...})")
    tr.add_argument("--warmup-epochs", type=int, dest="warmup_epochs")
    tr.add_argument("--grad-clip-norm", type=float, dest="grad_clip_norm", metavar="NORM",
                    help="clip each replica's gradient to this global 2-norm")
    tr.add_argument("--precision", choices=("fp32", "bf16"), help="bf16: forward under bfloat16 autocast")
    tr.add_argument("--dropout", type=float)
    tr.add_argument("--split", type=lambda s: int(s) if s.isdigit() else s,
                    help="a split name (public, per_class, ratio...) or a Geom-GCN split number")
    tr.add_argument("--transform", action="append", dest="transforms", metavar="NAME",
                    help="dataset transform by name (repeatable), e.g. normalize_features")
    tr.add_argument("--seeds", type=parse_seeds, default=[0])
    tr.add_argument("--dtype", choices=("float32", "float64"))
    tr.add_argument("--set", action="append", type=parse_setting, default=[], metavar="KEY=VALUE",
                    help="any other suite key: model option, dataset option (data.KEY), trainer key")
    tr.add_argument("--device", type=parse_device, default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    tr.add_argument("--out", default=None, help="results folder (default results/train/<config hash>)")
    tr.add_argument("--data-root", default=None)
    tr.add_argument("--sequential", action="store_true", help="train seeds one at a time instead of stacked")
    tr.add_argument("--save-weights", choices=("none", "best", "last"), default="none",
                    help="keep each run's weights beside its record (as zoo bench --save-weights)")
    tr.add_argument("--force-new", action="store_true",
                    help="OUT holds another configuration's results: move them to OUT/superseded-<time>/ first")
    tr.add_argument("--quiet", action="store_true")

    be = sub.add_parser("bench", help="run a benchmark suite (resumable) and write its leaderboard")
    be.add_argument("suite", help="suite name (`zoo list suites`) or path to a .toml file")
    be.add_argument("--quick", action="store_true", help="the suite's small [quick] form")
    be.add_argument("--set", action="append", type=parse_setting, default=[], metavar="KEY=VALUE",
                    help="a stated-reduced protocol: set KEY in every cell after everything else in the suite "
                         "(repeatable; TOML/JSON values, e.g. epochs=200, warmup_epochs=20, prune_layers=[2,32,64]); "
                         "ids change, records and `zoo report` say so; cells are chosen with --where, not --set")
    be.add_argument("--device", type=parse_device, default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    be.add_argument("--out", default=None, help="results folder (default results/<suite>[-quick][-set-<hash>])")
    be.add_argument("--data-root", default=None)
    be.add_argument("--max-replicas", type=positive_int, default=None,
                    help="cap on replicas trained at once (memory)")
    be.add_argument("--force-new", action="store_true",
                    help="OUT holds another/edited suite's results: move them to OUT/superseded-<time>/ and start afresh")
    be.add_argument("--sequential", action="store_true", help="one run at a time (reference / debugging)")
    be.add_argument("--quiet", action="store_true", help="no progress bars (CI)")
    be.add_argument("--no-leaderboard", action="store_true")
    be.add_argument("--save-weights", choices=("none", "best", "last"), default="none",
                    help="keep each run's weights beside its record: best = the selected epoch, last = the final "
                         "state (OUT/weights/<id>.safetensors, ~4 bytes per parameter; zoo.load(OUT, cell=, seed=))")
    ex = be.add_argument_group("selection and execution (docs/distributed.md)")
    ex.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]",
                    help="run only cells with KEY in the values (repeatable; keys as in the suite, e.g. "
                         "dataset=cornell_npz, num_layers=2,5); ids stay the full suite's")
    ex.add_argument("--shard", default=None, metavar="I/N",
                    help="run shard I of N (1-based): a deterministic, cost-balanced part of the groups "
                         "(job arrays; combine the --out folders with `zoo merge`)")
    ex.add_argument("--executor", choices=("local", "process", "ray"), default="local",
                    help="where groups run: here / in --workers processes (default), or on Ray")
    ex.add_argument("--workers", type=parse_workers, default=None, metavar="N|auto",
                    help="run groups in N worker processes, one torch thread each; 1 = in this process. "
                         "Default auto: one per CPU core, capped by the groups (in this process when that is 1, "
                         "or on a GPU), which measured fastest on a 2-core machine (docs/distributed.md); "
                         "1 with --threads or --executor ray")
    ex.add_argument("--threads", type=positive_int, default=None, metavar="N",
                    help="torch threads for groups run in this process (default 1 on the CPU: small graphs "
                         "gain nothing from more and slow down sharply when cores are shared)")
    ex.add_argument("--estimate", action="store_true",
                    help="run nothing: print per slice the runs, groups, expected epochs and estimated time "
                         "(calibrated cost model) for this executor and workers, and the total")
    ex.add_argument("--estimate-by", default=None, metavar="KEY[,KEY]",
                    help="--estimate: the keys that make a slice (default dataset,num_layers where they vary)")
    ex.add_argument("--checkpoint-every", default=None, metavar="T",
                    help="a group training longer than T saves its state in OUT/checkpoints/ and a re-run resumes "
                         "it: 600, 10m, 2h (wall time), 50ep (epochs) or off (default 10m)")
    ex.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="Ray cluster to join (default: start a local Ray instance)")
    ex.add_argument("--cpus-per-group", type=float, default=1.0, metavar="C", help="Ray: CPUs per task (default 1)")
    ex.add_argument("--gpus-per-group", type=float, default=0.0, metavar="F",
                    help="Ray: GPUs per task, a fraction shares one GPU between groups (default 0)")
    ex.add_argument("--max-retries", type=int, default=3, metavar="N",
                    help="Ray: retries of a group whose worker died before it is recorded as failed (default 3)")

    dg = sub.add_parser("diagnose", help="train briefly (or load saved weights), record every layer's diagnostics, "
                                         "and write one HTML page showing why the model trains or not")
    dg.add_argument("model", help="model name (A,B: models side by side), a checkpoint (.safetensors from zoo.save), "
                                  "or a zoo bench results folder with --cell/--seed (run with --save-weights)")
    dg.add_argument("--dataset", default=None, help="transductive dataset (default: a bench checkpoint's own)")
    dg.add_argument("--layers", type=positive_int, dest="num_layers")
    dg.add_argument("--hidden", type=positive_int, dest="hidden_dim")
    dg.add_argument("--init", type=lambda s: [v for v in s.split(",") if v], default=None, metavar="A[,B...]",
                    help="inits to compare side by side, e.g. xavier,bal_o")
    dg.add_argument("--norm", help="norm plugin (A,B: norms side by side)")
    dg.add_argument("--epochs", type=int, default=50)
    dg.add_argument("--optimizer", default="sgd")
    dg.add_argument("--lr", type=float, default=0.05)
    dg.add_argument("--seeds", type=parse_seeds, default=[0])
    dg.add_argument("--every", type=positive_int, default=1, help="record every N epochs (default 1)")
    dg.add_argument("--set", action="append", type=parse_setting, default=[], metavar="KEY=VALUE",
                    help="any other suite key (model option, trainer key, dtype=float64...)")
    dg.add_argument("--cell", default=None, help="with a results folder: the run's cell id (or a unique prefix)")
    dg.add_argument("--seed", type=int, default=None, help="with a results folder: the run's seed")
    dg.add_argument("--device", default=None)
    dg.add_argument("--out", default="diagnose.html", help="the page to write (default %(default)s)")

    mg = sub.add_parser("merge", help="merge shard / slice results folders of one suite into one folder")
    mg.add_argument("results", nargs="+", help="results folders written by `zoo bench --shard I/N --out ...`")
    mg.add_argument("--out", required=True, help="new folder for the merged results")

    lb = sub.add_parser("leaderboard", help="Markdown/CSV/JSON/HTML leaderboard from results folders")
    lb.add_argument("results", nargs="+")
    lb.add_argument("--out", required=True)

    rp = sub.add_parser("report", help="reproduction report (docs/reproduction.md + index.html) from committed "
                                       "run records, with a status per cell (zoo/bench/analyze/status.py)")
    rp.add_argument("records", nargs="?", default=REPORT_DEFAULTS.records,
                    help=f"folder of record folders, one per suite (default {REPORT_DEFAULTS.records})")
    rp.add_argument("--md", default=REPORT_DEFAULTS.md, help="Markdown report to write (default %(default)s)")
    rp.add_argument("--html", default=REPORT_DEFAULTS.html, help="HTML page to write (default %(default)s)")
    rp.add_argument("--notes", default=None,
                    help="notes file: why cells differ / what was tried (default RECORDS/../notes.toml)")
    rp.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if the Markdown on disk is out of date or an open cell has no note")
    rp.add_argument("--draft", action="store_true",
                    help="write the pages even if open cells have no note yet (marked; exit 1); --check refuses them")
    rp.add_argument("--todo", action="store_true",
                    help="write nothing; print the commands filling the paper cells not run, cheapest first")
    rp.add_argument("--class", dest="todo_class", choices=("runs-here", "gpu"), default=None,
                    help="with --todo: only this class of cells (default both)")
    rp.add_argument("--max-hours", type=float, default=None,
                    help="with --todo: the cheapest commands adding up to at most this many estimated hours")
    rp.add_argument("--out-root", default=None,
                    help="with --todo: add --out OUT_ROOT/<suite> to each command (pipe the list to sh to run it)")
    from zoo.cli_docs import add_docs_parser
    add_docs_parser(sub)
    sub.add_parser("build-kernels", help="compile the C++ attention kernels now (else: at first use); "
                                         "prints the library's path (zoo/ops/_compiled/build.py)")
    return p


def _list(what: Optional[str]) -> int:
    import zoo
    from zoo.bench.suite.load import list_suites

    sections = [what] if what else list(LISTABLE)
    for s in sections:
        if s == "datasets":
            from zoo.datasets import format_datasets_table

            print("datasets:\n" + format_datasets_table())
            continue
        if s == "suites":
            print("suites:\n" + _suites_table())
            continue
        names = {"models": zoo.list_models, "inits": zoo.list_inits, "norms": zoo.list_norms}[s]()
        print(f"{s}: {', '.join(_with_aliases(s, names))}")
    return 0


def _with_aliases(section: str, names: Sequence[str]) -> List[str]:
    """``balanced_orthogonal (bal_o, balo, ...)``: the short names the README and suites use."""
    from zoo.bench.suite.plugins import registry

    aliases = registry({"models": "model", "inits": "init", "norms": "norm"}[section]).aliases()
    by_name: Dict[str, List[str]] = {}
    for alias, name in aliases.items():
        by_name.setdefault(name, []).append(alias)
    return [f"{n} ({', '.join(sorted(by_name[n]))})" if n in by_name else n for n in names]


def _suites_table() -> str:
    """Each suite's runs and estimated CPU-hours at its full protocol (zoo.bench.plan.cost)."""
    from zoo.bench.suite.cells import cell_value
    from zoo.bench.plan import cost, cost_file
    from zoo.bench.plan.estimate import estimate
    from zoo.bench.suite.load import list_suites, load_suite

    model, table = cost_file.load_cost_model("cpu"), cost.load_dataset_table()
    lines = []
    for name in list_suites():
        try:
            suite = load_suite(name, validate_models=False)
        except Exception as e:  # a broken suite file is listed, not fatal
            lines.append(f"  {name:<20} (cannot be loaded: {e})")
            continue
        est = estimate(name, suite.mode, suite.groups(), model, table, cell_value, by=())
        lines.append(f"  {name:<20} {len(suite.cells):>5} runs  {est.cpu_seconds / 3600:>9,.1f} CPU-hours")
    return "\n".join(lines) + "\n  (estimated by the cost model fitted on the records' shared 2-core CPU; " \
        "zoo bench SUITE --estimate gives the table per slice)"


def _train_suite(args: argparse.Namespace) -> Dict[str, Any]:
    """``zoo train``'s suite: zoo.fit's cells for the same options (:func:`zoo.fitting.fit_suite`),
    run by the runner so that they are recorded, resumable and on a leaderboard."""
    from zoo.fitting import fit_suite

    keys: Dict[str, Any] = {}
    for key in ("num_layers", "hidden_dim", "heads", "norm", "optimizer", "lr", "weight_decay", "epochs",
                "patience", "lr_scheduler", "warmup_epochs", "grad_clip_norm", "precision", "dropout", "split",
                "transforms", "dtype"):
        v = getattr(args, key)
        if v is not None:
            keys[key] = v
    inits = [v for v in (args.init or "").split(",") if v]
    for key, value in args.set:
        if key in keys or (key == "init" and inits):
            raise CliError(f"{key!r} is given twice (as an option and with --set); give it once")
        keys[key] = value
    return fit_suite(args.model, args.dataset, seeds=args.seeds, inits=inits, name="train",
                     title=f"zoo train {args.model} on {args.dataset}", **keys)


def _bench(suite, out: Path, args: argparse.Namespace, leaderboard: bool = True) -> int:
    from zoo.bench.analyze.board import load_board
    from zoo.bench.publish import write_leaderboard
    from zoo.bench.render.leaderboard import to_markdown
    from zoo.bench.run.driver import data_env, run_suite
    from zoo.bench.run.executors import make_executor
    from zoo.bench.plan.shards import parse_shard
    from zoo.bench.suite.selection import parse_where

    where = parse_where(getattr(args, "where", []) or [])
    shard = parse_shard(args.shard) if getattr(args, "shard", None) else None
    name, workers = getattr(args, "executor", "local"), default_workers(args)
    if name == "ray":
        if workers != 1:
            raise ValueError("--workers is for the process executor; with --executor ray the cluster's CPUs set "
                             "the parallelism (--cpus-per-group / --gpus-per-group per task)")
        executor: Any = make_executor("ray", ray_address=args.ray_address, cpus_per_group=args.cpus_per_group,
                                      gpus_per_group=args.gpus_per_group, max_retries=args.max_retries,
                                      env=data_env())
    else:
        executor = name
    writable_dir(out, "--out")
    if args.data_root is not None:
        writable_dir(Path(args.data_root), "--data-root", probe=False)
    elif os.environ.get("ZOO_DATA"):  # the same check for the environment's data root, before any run
        writable_dir(Path(os.environ["ZOO_DATA"]).expanduser(), "$ZOO_DATA", probe=False)
    args.bench_out = out  # for the Ctrl-C message
    summary = run_suite(suite, out, device=args.device, quiet=args.quiet, stacked=not args.sequential,
                        max_replicas=getattr(args, "max_replicas", None), data_root=args.data_root,
                        force_new=getattr(args, "force_new", False),
                        executor=executor, workers=workers, where=where, shard=shard,
                        threads=getattr(args, "threads", None), save_weights=args.save_weights,
                        checkpoint_every=getattr(args, "checkpoint_every", None))
    print(f"{suite.name}: {summary.ran} run(s) done now, {summary.already_done} already done, "
          f"{len(summary.skipped)} skipped, {len(summary.failed)} failed, {summary.diverged} diverged; "
          f"{summary.wall_time_s:.1f} s ({summary.executor}); results in {out}")
    if summary.skipped:
        for reason in sorted(set(summary.skipped.values())):
            print(f"  skipped: {reason}", file=sys.stderr)
    if summary.failed:
        for error in sorted(set(summary.failed.values())):
            print(f"  failed (recorded; a re-run retries it): {error.strip().splitlines()[-1]}", file=sys.stderr)
    if summary.ran + summary.already_done == 0:
        if summary.failed:
            print(f"zoo: no run of {suite.name} finished: {len(summary.failed)} failed (see above)", file=sys.stderr)
            return EXIT_FAILED
        print(f"zoo: nothing ran: none of the {summary.total} run(s) of {suite.name} could start "
              "(see 'skipped' above); nothing was recorded", file=sys.stderr)
        return EXIT_NOTHING
    if leaderboard:
        paths = write_leaderboard([out], out / "leaderboard")
        print(to_markdown(load_board(out)))
        print(f"leaderboard: {paths['html']}")
    return EXIT_FAILED if summary.failed else 0


def _estimate(suite: Any, out: Path, args: argparse.Namespace) -> int:
    """``zoo bench SUITE --estimate``: the cost of what a run with these options would do."""
    import os

    from zoo.bench.store import records
    from zoo.bench.suite.cells import cell_value
    from zoo.bench.plan.shards import parse_shard, select
    from zoo.bench.suite.selection import parse_where
    from zoo.bench.plan import cost, cost_file
    from zoo.bench.plan.estimate import DEFAULT_BY, estimate, format_estimate

    where = parse_where(args.where or [])
    shard = parse_shard(args.shard) if args.shard else None
    cells = select(suite, where, shard)
    finished = records.read_records(out) if (out / records.RESULTS_FILE).exists() else []
    done = {r["id"] for r in finished if r.get("status", "ok") == "ok"}
    pending = [c for c in cells if c.id not in done]
    jobs: Dict[str, List[Any]] = {}
    for c in pending:
        jobs.setdefault(c.group, []).append(c)
    size = None if args.sequential else args.max_replicas
    split: Dict[str, List[Any]] = {}
    for gid, group in jobs.items():
        step = 1 if args.sequential else (size or len(group))
        for i in range(0, len(group), step):
            split[f"{gid}:{i}"] = group[i:i + step]
    device = args.device or "cpu"
    workers = default_workers(args)
    if args.executor == "ray":
        workers, executor = max(1, int((os.cpu_count() or 1) // max(args.cpus_per_group, 1e-9))), "ray (this machine)"
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = max(1, min(cores, len(split) or 1)) if workers == "auto" else int(workers)
        executor = "local" if workers == 1 else "process"
    by = [k.strip() for k in args.estimate_by.split(",")] if args.estimate_by else list(DEFAULT_BY)
    est = estimate(suite.name, suite.mode, split, cost_file.load_cost_model(device), cost.load_dataset_table(),
                   cell_value, by=by, finished=finished, done=[c.id for c in cells if c.id in done],
                   workers=workers, executor=executor, device=device)
    command = f"zoo bench {args.suite}" + "".join(f" --set {k}={v}" for k, v in args.set) + \
        "".join(f" --where {w}" for w in args.where or [])
    print(format_estimate(est, command))
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from zoo.diagnostics.diagnose import diagnose

    options = {k: getattr(args, k) for k in ("num_layers", "hidden_dim") if getattr(args, k) is not None}
    if args.norm:
        norms = [v for v in args.norm.split(",") if v]
        options["norm"] = norms if len(norms) > 1 else norms[0]
    for key, value in args.set:
        if key in options:
            raise CliError(f"{key!r} is given twice (as an option and with --set)")
        options[key] = value
    writable_dir(Path(args.out).resolve().parent, "--out")
    with warnings.catch_warnings(record=True) as caught:  # one line each, not Python's two-line format
        warnings.simplefilter("always", UserWarning)
        d = diagnose(args.model, args.dataset, inits=args.init, epochs=args.epochs, seeds=args.seeds,
                     optimizer=args.optimizer, lr=args.lr, every=args.every, out=args.out, cell=args.cell,
                     seed=args.seed, device=args.device, **options)
    for w in caught:
        print(f"zoo diagnose: warning: {str(w.message).removeprefix('zoo.diagnose: ')}", file=sys.stderr)
    for history in d.history if isinstance(d.history, list) else [d.history]:
        print(history.summary())
    print(f"verdict: {d.verdict}")
    print(f"page: {d.path} ({d.seconds:.1f} s)")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from zoo.bench.store.merge import merge

    s = merge(args.results, args.out)
    print(f"merged {s.inputs} folder(s) into {s.out}: {s.runs} finished run(s) of {s.total}, "
          f"{s.failed} failed record(s) kept (a re-run retries them)")
    if s.missing_shards:
        print(f"  warning: shard(s) {', '.join(map(str, s.missing_shards))} not among the inputs", file=sys.stderr)
    return 0


def _todo(args: argparse.Namespace) -> int:
    from zoo.bench.analyze.status import build_report
    from zoo.bench.analyze.todo import todo
    from zoo.bench.render.missing import todo_lines

    commands = todo(build_report(args.records, args.notes), args.todo_class, args.max_hours)
    if not commands:
        print("zoo report: no paper cell left to run in that selection", file=sys.stderr)
        return EXIT_NOTHING
    print("\n".join(todo_lines(commands, args.out_root)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from zoo.bench.analyze.status import MissingNotesError
    from zoo.bench.publish import write_report

    if args.todo:
        return _todo(args)
    if args.todo_class is not None or args.max_hours is not None or args.out_root is not None:
        raise CliError("--class, --max-hours and --out-root go with --todo (zoo report --todo --class runs-here)")
    try:
        report, problems = write_report(args.records, args.md, args.html, report_sources(args.records),
                                        notes_path=args.notes,
                                        check=args.check, draft=args.draft)
    except MissingNotesError as e:
        print(f"zoo report: {e}", file=sys.stderr)
        return EXIT_FAILED
    counts = report.counts()
    print("zoo report: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f" ({len(report.suites)} record folder(s))")
    print("zoo report: findings " + ", ".join(f"{k} {v}" for k, v in report.finding_counts().items()))
    for n in report.unused_notes():
        print(f"zoo report: warning: note #{n.index} of suite {n.suite!r} matches no compared cell of its records "
              f"(when = {n.when}, table = {n.table!r})", file=sys.stderr)
    for p in problems:
        print(f"zoo report: {p}", file=sys.stderr)
    if not args.check:
        print(f"md: {args.md}\nhtml: {args.html}")
    return EXIT_FAILED if problems else 0


def _calibrate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zoo bench calibrate",
                                description="fit the cost model (zoo.bench.plan.calibration) on finished records")
    p.add_argument("records", nargs="+", help="results folders or results.jsonl files")
    p.add_argument("--out", required=True, help="cost-model JSON to write (its other devices' entries are kept)")
    p.add_argument("--device", default="cpu",
                   help="the device kind to fit (default cpu): only the records that ran on it count")
    p.add_argument("--no-suite-factors", action="store_true", help="fit one model for every suite")
    return p


def _calibrate(argv: Sequence[str]) -> int:
    """``zoo bench calibrate RECORDS... --out FILE``: fit, print the leave-one-out error, write."""
    from zoo.bench.store import records
    from zoo.bench.plan import calibration, cost, cost_file

    args = _calibrate_parser().parse_args(argv)
    try:
        rows = [r for path in args.records for r in records.read_records(path)]
        table = cost.load_dataset_table()
        every = calibration.observations(rows, device=args.device)
        obs = [o for o in every if o.mode == "train"]
        per_suite = not args.no_suite_factors
        model = calibration.fit(every, table, per_suite, device=args.device,
                         fitted_on=f"{len(obs)} trained groups in {len(args.records)} records folder(s) on "
                                   + ", ".join(sorted({str(r.get("device") or "cpu") for r in rows
                                                       if calibration.device_kind(r) == args.device.split(":")[0]})))
        loo = calibration.leave_one_out(obs, table, per_suite)
        plain = calibration.leave_one_out(obs, table, False) if per_suite else loo
        old = calibration.proportional_leave_one_out(
            obs, [calibration.size_cost(o.config, o.replicas, o.epochs) for o in obs])
        cost_file.write_model([model], Path(args.out), {"leave_one_out": loo.describe(),
                                                   "leave_one_out_without_suite_factors": plain.describe(),
                                                   "leave_one_out_group_cost": old.describe()})
    except (OSError, ValueError, records.CorruptRecordsError) as e:
        print(f"zoo bench calibrate: error: {_os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    print("coefficients (s per unit): " + ", ".join(f"{k} {v:.3g}" for k, v in model.coefficients.items()))
    print(f"leave-one-out, this model{' with per-suite factors' if per_suite else ''}: {loo.describe()}")
    if per_suite:
        print(f"leave-one-out, without per-suite factors: {plain.describe()}")
    print(f"leave-one-out, selection.group_cost (x a fitted scale): {old.describe()}")
    print(f"written: {args.out} ({args.device})")
    return 0


def _recorded(out: Path) -> int:
    """Run records in ``out`` (the ones a resume skips); 0 when the file cannot be read."""
    from zoo.bench.store.records import completed_ids

    try:
        return len(completed_ids(out / "results.jsonl"))
    except Exception:  # noqa: BLE001 - the message must not fail over a corrupt file
        return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["bench", "calibrate"]:  # a sub-command of bench, not a suite named "calibrate"
        return _calibrate(argv[2:])
    args = _parser().parse_args(argv)
    from zoo.bench.suite.schema import SuiteError

    try:
        if args.command == "list":
            return _list(args.what)
        if args.command == "bench":
            from zoo.bench.suite.load import load_suite

            from zoo.bench.suite.selection import parse_where

            suite = load_suite(args.suite, quick=args.quick, settings=settings_of(args.set),
                               where=parse_where(args.where or []))
            out = Path(args.out) if args.out else default_bench_out(suite, args.quick)
            if args.estimate:
                return _estimate(suite, out, args)
            return _bench(suite, out, args, leaderboard=not args.no_leaderboard)
        if args.command == "train":
            from zoo.bench.suite.load import parse_suite
            from zoo.bench.suite.schema import cell_id

            raw = _train_suite(args)
            suite = parse_suite(raw, source="zoo train")
            out = Path(args.out or f"results/train/{cell_id(raw)[:10]}")
            args.max_replicas = None
            return _bench(suite, out, args)
        if args.command == "diagnose":
            return _diagnose(args)
        if args.command == "merge":
            return _merge(args)
        if args.command == "build-kernels":
            from zoo.ops._compiled.build import build_for_cli

            return build_for_cli()
        if args.command == "report":
            return _report(args)
        if args.command == "docs":
            from zoo.cli_docs import run
            return run(args)
        if args.command == "leaderboard":
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
    except BrokenPipeError:  # the reader closed the pipe (`zoo list | head -1`): it has what it wanted
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        out = getattr(args, "bench_out", None)
        if out is None:
            print(f"zoo {args.command}: interrupted", file=sys.stderr)
        else:
            print(f"zoo {args.command}: interrupted: {_recorded(out)} run(s) recorded in {out}; "
                  "run the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (SuiteError, CliError, ValueError, TypeError, RuntimeError, OSError) as e:
        # OSError: disk full, read-only or vanished folders...: one line, no traceback
        print(f"zoo {args.command}: error: {_os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    return 1  # pragma: no cover - argparse enforces a command


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
