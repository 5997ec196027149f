"""Mode rank_at_init: the ranks of every layer's output of the untrained replicas, the effective rank
of the last as the metric, both per-layer traces in the record's extra; refused on a dataset that is
not one graph when the suite is read."""
from __future__ import annotations

import copy
import math

import pytest
import torch

from zoo.bench.run.modes import get_mode
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.schema import SuiteError
from zoo.diagnostics.oversmoothing import layer_representations
from zoo.diagnostics.rank import equal_rows_distance, rank_trace
from zoo.trainer.cells import TaskCache, start_group

SUITE = {
    "suite": {"name": "tiny_rank", "title": "rank_at_init test", "mode": "rank_at_init"},
    "defaults": {"dataset": "gate_synthetic", "setting": 27, "num_nodes": 60, "num_layers": 4, "hidden_dim": 8,
                 "epochs": 0, "dtype": "float64", "model": "gat", "activation": "identity", "classifier": "linear"},
    "grid": {"seed": [0, 1]},
    "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "effective_rank"},
}


def test_each_replica_records_the_rank_trace_of_its_own_weights():
    cells = parse_suite(copy.deepcopy(SUITE)).cells
    task = TaskCache().get(cells[0].config["task"])
    run = start_group([c.config for c in cells], task, torch.device("cpu"), trains=False)
    results = get_mode("rank_at_init").produce(run, cells)
    base = run.replicas.base
    for r, res in enumerate(results):
        base.load_state_dict(run.replicas.state_of(r), strict=False)
        base.eval()
        for rank in ("effective_rank", "numerical_rank"):
            by_hand = rank_trace(base, run.view.edge_index, run.view.x, rank).tolist()
            assert len(by_hand) == 4  # X^1 .. X^4: the classifier's logits are not a layer output
            assert res.extra[f"{rank}_per_layer"] == pytest.approx(by_hand, rel=1e-12)
        reps = layer_representations(base, run.view.edge_index, run.view.x)
        assert res.extra["equal_rows_distance_per_layer"] == pytest.approx([_rows(x) for x in reps], rel=1e-12)
        assert res.metrics == {m: res.extra[f"{m}_per_layer"][-1] for m in ("effective_rank", "equal_rows_distance")}
        assert res.stop_reason == "measured" and res.epochs_run == 0
    assert results[0].metrics != results[1].metrics  # each seed its own draw


def _rows(x: torch.Tensor) -> float:
    """The distance to equal rows by hand: every row against the mean row, relative to X."""
    x = x.double()
    return float(((x - x.mean(0)) ** 2).sum().sqrt() / (x ** 2).sum().sqrt())


def test_the_distance_to_equal_rows_tells_one_point_from_one_direction():
    u = torch.tensor([[1.0], [2.0], [-1.0]])
    v = torch.tensor([[3.0, 4.0]])
    assert equal_rows_distance(torch.ones(3, 1) @ v) == 0.0  # every node the same vector
    assert equal_rows_distance(u @ v) > 0.5  # rank one, yet the nodes differ
    assert equal_rows_distance(torch.zeros(3, 2)) == 0.0
    assert math.isnan(equal_rows_distance(torch.tensor([[float("nan"), 0.0]])))  # a diverged replica


def test_a_dataset_that_is_not_one_graph_is_refused_in_one_line():
    bad = copy.deepcopy(SUITE)
    bad["defaults"] = {k: v for k, v in bad["defaults"].items() if k not in ("setting", "num_nodes")}
    bad["defaults"]["dataset"] = "twin"
    with pytest.raises(SuiteError, match="mode 'rank_at_init' measures one graph: .*'twin' is") as e:
        parse_suite(bad, validate_models=False)
    assert "\n" not in str(e.value)
