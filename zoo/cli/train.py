"""``zoo train``: one configuration over several seeds (and inits), run by the suite runner so that it
is recorded, resumable and on a leaderboard.

    zoo train --model gatv2 --dataset cora --num-layers 10 --inits bal_o --optimizer sgd --lr 0.05 \\
              --epochs 5000 --seeds 0-4 [--set heads=8 --set data.undirected=true] [--device cuda]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict

from zoo.cli.args import (add_architecture, add_imports, add_renamed, add_settings, merge_settings, parse_device,
                          parse_seeds, user_path)

#: the flags that set a suite key of the same name (``--weight-decay`` sets ``weight_decay``)
SUITE_KEYS = ("num_layers", "hidden_dim", "heads", "norm", "optimizer", "lr", "weight_decay", "epochs", "patience",
              "lr_scheduler", "warmup_epochs", "grad_clip_norm", "precision", "flush_subnormals", "dropout", "split",
              "transforms", "dtype")


def register(sub: Any) -> None:
    p = sub.add_parser("train", help="train one configuration over several seeds")
    p.add_argument("--model", required=True)
    p.add_argument("--dataset", required=True)
    add_imports(p)
    add_architecture(p)
    p.add_argument("--heads", type=int)
    p.add_argument("--norm")
    p.add_argument("--optimizer", metavar="sgd|adam|adamw",
                   help="default (as for every key not given): the suites' and zoo.fit's, docs/benchmarks.md")
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--epochs", type=int)
    p.add_argument("--patience", type=int)
    p.add_argument("--lr-scheduler",
                   help="none, plateau, step, multistep, exponential, cosine (options: --set lr_scheduler_kwargs={...})")
    p.add_argument("--warmup-epochs", type=int)
    p.add_argument("--grad-clip-norm", type=float, metavar="NORM",
                   help="clip each replica's gradient to this global 2-norm")
    p.add_argument("--precision", metavar="fp32|bf16", help="bf16: forward under bfloat16 autocast")
    p.add_argument("--flush-subnormals", action="store_true", default=None,
                   help="CPU: compute with subnormal numbers flushed to zero (FTZ/DAZ) for the run; a cell key")
    p.add_argument("--dropout", type=float)
    p.add_argument("--split", type=lambda s: int(s) if s.isdigit() else s,
                   help="a split name (public, per_class, ratio...) or a Geom-GCN split number")
    add_renamed(p, "--transforms", "--transform", action="append", metavar="NAME",
                help="dataset transform by name (repeatable), e.g. normalize_features")
    p.add_argument("--seeds", type=parse_seeds, default=[0], metavar="0-4|0,3,7",
                   help="seeds, one replica each (default 0)")
    p.add_argument("--dtype", metavar="float32|float64")
    add_settings(p, "any other suite key: model option, dataset option (data.KEY), trainer key")
    p.add_argument("--device", type=parse_device, default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--out", default=None, type=user_path, help="results folder (default results/train/<config hash>)")
    p.add_argument("--data-root", default=None, type=user_path)
    p.add_argument("--sequential", action="store_true", help="train seeds one at a time instead of stacked")
    p.add_argument("--cuda-graphs", default="auto", metavar="auto|on|off",
                   help="replay each training epoch as CUDA graphs: auto (default: on a CUDA device where the run "
                        "allows it and a replayed epoch equals an eager one; a group whose graphs fail runs again "
                        "eagerly in a fresh process), on (required), off")
    p.add_argument("--save-weights", default="none", metavar="none|best|last",
                   help="keep each run's weights beside its record (as zoo bench --save-weights)")
    p.add_argument("--force-new", action="store_true",
                   help="OUT holds another configuration's results: move them to OUT/superseded-<time>/ first")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(handler=run, prog=p.prog)


def train_suite(args: argparse.Namespace) -> Dict[str, Any]:
    """``zoo train``'s suite: zoo.fit's cells for the same options (:func:`zoo.fitting.fit_suite`)."""
    from zoo.fitting import fit_suite

    keys = {key: getattr(args, key) for key in SUITE_KEYS if getattr(args, key) is not None}
    inits = args.inits or []
    merge_settings(keys, args.set, flagged=("init",) if inits else ())
    return fit_suite(args.model, args.dataset, seeds=args.seeds, inits=inits, name="train",
                     title=f"zoo train {args.model} on {args.dataset}", **keys)


def run(args: argparse.Namespace) -> int:
    """``zoo train``: zoo.fit's cells for these options, run by the suite runner with ``zoo train``'s own
    :class:`~zoo.bench.run.options.RunOptions`."""
    from zoo.bench.run.options import RunOptions
    from zoo.bench.suite.load import parse_suite
    from zoo.bench.suite.schema import cell_id
    from zoo.cli.runs import run_and_report

    raw = train_suite(args)
    suite = parse_suite(raw, source="zoo train")
    out = Path(args.out or f"results/train/{cell_id(raw)[:10]}")
    options = RunOptions(device=args.device, workers="auto", stacked=not args.sequential, data_root=args.data_root,
                         save_weights=args.save_weights, cuda_graphs=args.cuda_graphs, force_new=args.force_new,
                         quiet=args.quiet)
    args.bench_out = out  # for the Ctrl-C message
    return run_and_report(suite, out, options)
