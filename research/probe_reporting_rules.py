"""Probe: how much a paper's *reporting rule* moves a suite cell's number.

Papers say little about which state of a run they report.  This probe trains the cells a ``zoo bench``
command would train (the same suite, ``--where`` and ``--set``, the runner's own trainer and stacked
replicas), evaluates every epoch, and reads several rules off the same traces, so that they differ only in
the rule:

* ``final``: the last epoch (``select = "last"``; the LipschitzNorm authors' ``test()`` after training);
* ``best_val``: the first epoch with the highest validation accuracy (``select = "val_metric"``);
* ``max_per_run``: each run's highest accuracy over epochs, averaged over runs (an upper bound no
  selection rule that looks at validation data alone can reach);
* ``max_of_mean``: the highest accuracy of the runs' *mean* curve over epochs, the rule of the
  LipschitzNorm authors' ``utils.get_cv_results`` (gdasoulas/LipschitzNorm @ 25ddec3: "mean over the
  folds ... max(mean_acc_test)"), which their training scripts do not call.

Each rule is read on the validation and the test accuracy (mean ± sample std over the runs, %).  The
runner's own selection (the cell's ``select``) stays what it is; the rules are read from the traces.

    OMP_NUM_THREADS=1 python research/probe_reporting_rules.py balance_table6 \\
        --where dataset=cora --where num_layers=2 --where variant=lipschitz_authors
    OMP_NUM_THREADS=1 python research/probe_reporting_rules.py lipschitz_table1 --where dataset=cora \\
        --where num_layers=2 --where variant=gcn_missing0 --where lr=0.01 --where dropout=0.5 --save DIR

``--save DIR`` writes each group's traces as JSON (per epoch and run: train / val / test accuracy).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch

from zoo.trainer.cells import TaskCache, model_factory, resolve_device, start_group
from zoo.bench.plan.shards import select
from zoo.bench.suite.selection import parse_where
from zoo.bench.suite.load import load_suite
from zoo.cli.args import parse_setting, settings_of  # the CLI's own --set parsing
from zoo.trainer.history import MetricsRecorder

RULES = ("final", "best_val", "max_per_run", "max_of_mean")


def _held(rows: Sequence[Sequence[float]]) -> List[List[float]]:
    """A run that stopped keeps its last state (the recorder writes nan after it): hold its last value."""
    out: List[List[float]] = []
    for row in rows:
        out.append([prev if math.isnan(x) else x for x, prev in zip(row, out[-1] if out else row)])
    return out


def read_rules(val: Sequence[Sequence[float]], test: Sequence[Sequence[float]]) -> Dict[str, Dict[str, List[float]]]:
    """``val`` / ``test``: ``(epochs, runs)`` accuracies in %.  Per rule and split, one value per run
    (``max_of_mean``: the mean curve's maximum, the same value for every run)."""
    val, test = _held(val), _held(test)
    runs = len(val[0])
    out: Dict[str, Dict[str, List[float]]] = {rule: {"val": [], "test": []} for rule in RULES}
    for r in range(runs):
        v, t = [row[r] for row in val], [row[r] for row in test]
        best = max(range(len(v)), key=lambda i: (v[i], -i))  # the first epoch with the highest val
        out["final"]["val"].append(v[-1]); out["final"]["test"].append(t[-1])
        out["best_val"]["val"].append(v[best]); out["best_val"]["test"].append(t[best])
        out["max_per_run"]["val"].append(max(v)); out["max_per_run"]["test"].append(max(t))
    for split, rows in (("val", val), ("test", test)):
        means = [statistics.fmean(row) for row in rows]
        out["max_of_mean"][split] = [max(means)] * runs
    return out


def _fmt(values: Sequence[float]) -> str:
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(set(values)) > 1 else 0.0
    return f"{mean:6.2f} ± {sd:4.2f}"


Builder = Callable[[], torch.nn.Module]


def report_rules(cells: Sequence, dev: torch.device, save: Optional[Path] = None,
                 wrap: Optional[Callable[[Builder], Builder]] = None) -> None:
    """Train ``cells`` group by group (stacked replicas, the runner's trainer) and print every rule per group;
    ``wrap`` transforms each model builder (a probe's change to the suite's model, e.g. a re-initialisation)."""
    groups: Dict[str, list] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    cache = TaskCache(None)
    torch.set_num_threads(1)
    for gid, group in groups.items():
        task = cache.get(group[0].config["task"])
        seeds = [c.seed for c in group]
        builders = [model_factory(c.config, task) for c in group]
        if wrap is not None:
            builders = [wrap(b) for b in builders]
        run = start_group([c.config for c in group], task, dev, factories=builders)  # the runner's adapter
        recorder = MetricsRecorder()
        run.train(callbacks=[recorder], labels=[f"seed={s}" for s in seeds])
        wall = time.perf_counter() - run.started
        val = [[100 * x for x in row] for row in recorder.rows["val"]]
        test = [[100 * x for x in row] for row in recorder.rows["test"]]
        rules = read_rules(val, test)
        point = {k: v for k, v in group[0].config["run"].items() if k in ("variant",)}
        print(f"group {gid} {point} seeds {seeds} ({len(val)} evaluated epochs, {wall:.0f} s)")
        for rule in RULES:
            print(f"  {rule:12s} val {_fmt(rules[rule]['val'])}   test {_fmt(rules[rule]['test'])}"
                  + ("" if rule == "max_of_mean" else "   per run test " +
                     " / ".join(f"{x:.1f}" for x in rules[rule]["test"])))
        if save:
            save.mkdir(parents=True, exist_ok=True)
            trace = {"cells": [c.id for c in group], "seeds": seeds, "config": group[0].config,
                     "epochs": recorder.epochs, "train": recorder.rows["train"], "val": recorder.rows["val"],
                     "test": recorder.rows["test"]}
            (save / f"{gid}.json").write_text(json.dumps(trace))


def main(argv: Sequence[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite")
    ap.add_argument("--where", action="append", default=[], metavar="KEY=V1[,V2]")
    ap.add_argument("--set", action="append", default=[], type=parse_setting, metavar="KEY=VALUE")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--save", type=Path, default=None, help="write each group's traces here (JSON)")
    args = ap.parse_args(argv)

    where = parse_where(args.where)
    suite = load_suite(args.suite, settings=settings_of(args.set), where=where)
    cells = select(suite, where, None)
    if not cells:
        ap.error("no cell matches the --where filters")
    report_rules(cells, resolve_device(args.device), save=args.save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
