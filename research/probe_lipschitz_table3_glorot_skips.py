"""Probe: LN Table 3's residual rows with the cited GAT's residual.

Veličković et al.'s code (PetarV-/GAT utils/layers.py, ``attn_head``) adds a 1x1 convolution of a layer's input to
each head's output wherever the input is not as wide as the head (with 8 heads of 8 on 64 channels: every layer),
Glorot-initialised.  The nearest zoo option is ``residual = "linear"`` (a learnt skip ``R x`` on every layer), which
starts at zero to keep a network balanced at init; this probe trains the probe suite's ``residual = "linear"``
points with the skips re-initialised Glorot-uniform (bias-free, unlike the convolution) and reads every reporting
rule (research/probe_reporting_rules.py) off the traces.

    OMP_NUM_THREADS=1 python research/probe_lipschitz_table3_glorot_skips.py res_linear      # GAT-Lip-res
    OMP_NUM_THREADS=1 python research/probe_lipschitz_table3_glorot_skips.py gatres_linear   # GAT-res

Result (Cora, L = 15, 8 heads of 8, attention dropout 0.5, seeds 0-2, test at the best validation epoch): GAT-Lip-res
62.0, GAT-res 58.5, against 77.6 / 77.1 with the zoo's identity skips (docs/notes/lipschitz_search.md).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from torch import nn

from zoo.trainer.cells import resolve_device
from zoo.bench.plan.shards import select
from zoo.bench.suite.selection import parse_where
from zoo.bench.suite.load import load_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_reporting_rules import report_rules  # noqa: E402

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
    report_rules(select(load_suite(PROBE, where=where), where, None), resolve_device("cpu"), wrap=with_glorot_skips)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "res_linear")
