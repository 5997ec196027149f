"""A finding may read another split's accuracy than the board's (the nonlocal
paper's "no degradation in training or validation accuracy" is about train / val, not test)."""
from __future__ import annotations

import pytest

from zoo.bench.analyze import board as lb
from zoo.bench.report import findings as fd


def _info(metric="test"):
    cells = []
    for layers in (2, 32):
        cfg = {"model": {"name": "san_pre_ln", "init": "xavier", "init_kwargs": {}, "norm": "none", "norm_kwargs": {},
                         "kwargs": {"num_layers": layers}},
               "task": {"dataset": "cora", "split": None, "transforms": [], "data_seed": 0, "options": {}},
               "train": {}, "run": {"seed": 0, "variant": None}}
        cells.append({"id": f"c{layers}", "config": cfg})
    reported = {"entries": [{"table": "T", "model": "san_pre_ln", "num_layers": 2, "value": 80.0, "metric": "val"},
                            {"table": "T", "model": "san_pre_ln", "num_layers": 32, "value": 79.0, "metric": "val"}]}
    return {"name": "s", "meta": {}, "cells": cells, "reported": reported,
            "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": metric}}


def _finding(metric):
    raw = [{"id": "f", "claim": "c", "source": "s", "quote": "q",
            "check": {"kind": "bounded", "cells": {"model": "san_pre_ln"}, "spread": 5, "metric": metric}}]
    return fd.parse_findings(raw, "t")


def test_a_validation_finding_reads_the_validation_accuracy():
    info = _info()
    board = fd.skeleton(info)
    (f,) = _finding("val")
    fd.validate([f], board, ["model", "num_layers"], "t")  # was refused: a finding could read the board's split only
    recs = [{"id": c["id"], "config": c["config"], "metrics": {"test": t, "val": v}}
            for c, t, v in zip(info["cells"], (0.9, 0.5), (0.80, 0.79))]  # test spans 40 points, val 1
    val = lb.aggregate({**info, "leaderboard": {**info["leaderboard"], "metric": "val"}}, recs)
    (res,) = fd.evaluate([f], board, {}, info["reported"],
                         split_numbers={"val": {(e.table, e.row, e.column): e for e in val.entries}})
    assert res.verdict == fd.HOLDS and "80.00" in res.comparisons[0].text
    assert res.paper == fd.HOLDS  # the paper's val numbers (80.0, 79.0), not its test ones


def test_other_metrics_are_still_refused():
    board = fd.skeleton(_info())
    (f,) = _finding("laplacian_energy")
    with pytest.raises(fd.FindingsError, match="not this suite's metric"):
        fd.validate([f], board, ["model", "num_layers"], "t")
