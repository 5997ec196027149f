"""``zoo diagnose MODEL --dataset D``: ``zoo.diagnose`` from the shell, one HTML page.

    zoo diagnose MODEL --dataset D [--num-layers N --inits A,B --norm N1[,N2] --epochs N --out PAGE.html]
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Dict

from zoo.cli.args import (add_architecture, add_imports, add_settings, merge_settings, parse_device, parse_seeds,
                          positive_int, user_path, writable_dir)


def register(sub: Any) -> None:
    p = sub.add_parser("diagnose", help="train briefly (or load saved weights), record every layer's diagnostics, "
                                        "and write one HTML page showing why the model trains or not")
    p.add_argument("model", help="model name (A,B: models side by side), a model file (.safetensors from zoo.save), "
                                 "or a zoo bench results folder with --cell/--seed (run with --save-weights)")
    p.add_argument("--dataset", default=None, help="transductive dataset (default: a bench model file's own)")
    add_imports(p)
    add_architecture(p)
    p.add_argument("--norm", help="norm plugin (A,B: norms side by side)")
    p.add_argument("--epochs", type=int, help="training epochs (default: the suites' and zoo.fit's, docs/benchmarks.md)")
    p.add_argument("--optimizer", metavar="sgd|adam|adamw", help="(default: as --epochs)")
    p.add_argument("--lr", type=float, help="(default: as --epochs)")
    p.add_argument("--seeds", type=parse_seeds, default=[0], metavar="0-4|0,3,7",
                   help="seeds, one replica each (default 0)")
    p.add_argument("--every", type=positive_int, default=1, help="record every N epochs (default 1)")
    add_settings(p, "any other suite key (model option, trainer key, dtype=float64...)")
    p.add_argument("--cell", default=None, help="with a results folder: the run's cell id (or a unique prefix)")
    p.add_argument("--seed", type=int, default=None, help="with a results folder: the run's seed")
    p.add_argument("--device", type=parse_device, default=None, help="cpu, cuda, cuda:1 (default: cuda if available)")
    p.add_argument("--out", default="diagnose.html", type=user_path, help="the page to write (default %(default)s)")
    p.set_defaults(handler=run, prog=p.prog)


def _options(args: argparse.Namespace) -> Dict[str, Any]:
    """The model and trainer keys of ``zoo.diagnose``'s ``**options``: flags, then ``--set``."""
    options = {k: getattr(args, k) for k in ("num_layers", "hidden_dim") if getattr(args, k) is not None}
    if args.norm:
        norms = [v for v in args.norm.split(",") if v]
        options["norm"] = norms if len(norms) > 1 else norms[0]
    return merge_settings(options, args.set)


def run(args: argparse.Namespace) -> int:
    from zoo.diagnosing import diagnose

    options = _options(args)
    writable_dir(Path(args.out).resolve().parent, "--out")
    with warnings.catch_warnings(record=True) as caught:  # one line each, not Python's two-line format
        warnings.simplefilter("always", UserWarning)
        d = diagnose(args.model, args.dataset, inits=args.inits, epochs=args.epochs, seeds=args.seeds,
                     optimizer=args.optimizer, lr=args.lr, every=args.every, out=args.out, cell=args.cell,
                     seed=args.seed, device=args.device, **options)
    for w in caught:
        print(f"zoo diagnose: warning: {str(w.message).removeprefix('zoo.diagnose: ')}", file=sys.stderr)
    for history in d.history if isinstance(d.history, list) else [d.history]:
        print(history.summary())
    print(f"verdict: {d.verdict}")
    print(f"page: {d.path} ({d.seconds:.1f} s)")
    return 0
