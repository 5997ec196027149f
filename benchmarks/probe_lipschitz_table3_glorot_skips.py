"""Probe: LN Table 3's residual rows with the cited GAT's residual (issue 23).

Veličković et al.'s code (PetarV-/GAT utils/layers.py, ``attn_head``) adds a 1x1 convolution of a layer's input to
each head's output wherever the input is not as wide as the head (with 8 heads of 8 on 64 channels: every layer),
Glorot-initialised.  The nearest zoo option is ``residual = "linear"`` (a learnt skip ``R x`` on every layer), which
starts at zero to keep a network balanced at init; this probe trains the probe suite's ``residual = "linear"``
points with the skips re-initialised Glorot-uniform (bias-free, unlike the convolution) and reads every reporting
rule (benchmarks/probe_reporting_rules.py) off the traces.

    OMP_NUM_THREADS=1 python benchmarks/probe_lipschitz_table3_glorot_skips.py res_linear      # GAT-Lip-res
    OMP_NUM_THREADS=1 python benchmarks/probe_lipschitz_table3_glorot_skips.py gatres_linear   # GAT-res

Result (Cora, L = 15, 8 heads of 8, attention dropout 0.5, seeds 0-2, test at the best validation epoch): GAT-Lip-res
62.0, GAT-res 58.5, against 77.6 / 77.1 with the zoo's identity skips (docs/notes/lipschitz_search.md).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from zoo.bench.run.driver import TaskCache, model_factory, resolve_device, train_config
from zoo.bench.run.train import build_replicas, train_replicas
from zoo.bench.spec.selection import parse_where, select
from zoo.bench.spec.suite import load_suite
from zoo.trainer.history import MetricsRecorder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_reporting_rules import RULES, _fmt, read_rules  # noqa: E402

PROBE = Path(__file__).resolve().parent / "probe_lipschitz_table3_lipres.toml"


def with_glorot_skips(build: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    """``build`` with every layer's learnt skip re-initialised Glorot-uniform."""
    def rebuild() -> nn.Module:
        model = build()
        if len(model.skips) != model.num_layers:
            raise SystemExit("the probe point has no learnt skip on every layer: pick a residual = 'linear' variant")
        for skip in model.skips:
            nn.init.xavier_uniform_(skip.weight)
        return model
    return rebuild


def main(variant: str) -> None:
    where = parse_where([f"variant={variant}"])
    cells = select(load_suite(PROBE, where=where), where, None)
    torch.set_num_threads(1)
    task = TaskCache(None).get(cells[0].config["task"])
    cfg = train_config(cells[0])
    seeds = [c.seed for c in cells]
    start = time.perf_counter()
    replicas, view = build_replicas(task, [with_glorot_skips(model_factory(c, task)) for c in cells], seeds,
                                    resolve_device("cpu"), torch.float32, cfg, True)
    recorder = MetricsRecorder()
    train_replicas(task, replicas, view, cfg, seeds, callbacks=[recorder], labels=[f"seed={s}" for s in seeds])
    val = [[100 * x for x in row] for row in recorder.rows["val"]]
    test = [[100 * x for x in row] for row in recorder.rows["test"]]
    rules = read_rules(val, test)
    print(f"{variant} with Glorot skips, seeds {seeds} ({time.perf_counter() - start:.0f} s)")
    for rule in RULES:
        per_run = " / ".join(f"{x:.1f}" for x in rules[rule]["test"])
        print(f"  {rule:12s} val {_fmt(rules[rule]['val'])}   test {_fmt(rules[rule]['test'])}"
              + ("" if rule == "max_of_mean" else f"   per run test {per_run}"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "res_linear")
