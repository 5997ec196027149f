"""``--shard`` balances and ``--workers`` orders groups by the calibrated cost model: a skewed
suite (one group costs as much as all others together, though the graph sizes, depth, epochs and
replicas — all the old ``group_cost`` saw — are the same) is split into balanced shards."""
from __future__ import annotations

from zoo.bench.plan import shards as sel
from zoo.bench.plan.calibration import size_cost
from zoo.bench.plan.shards import estimated_group_seconds
from zoo.bench.suite.load import parse_suite

SKEWED = {
    "suite": {"name": "skewed"},
    "defaults": {"model": "gatv2", "dataset": "pubmed", "num_layers": 2, "epochs": 1000, "optimizer": "sgd",
                 "lr": 0.01},
    "grid": {"variant": ["heavy", "a", "b", "c"], "seed": [0, 1, 2]},
    # 8 heads of 128 and dropout on PubMed's 500 dense-when-dropped features: several times the others' work
    "variants": {"heavy": {"dropout": 0.6, "heads": 8, "hidden_dim": 128}, "a": {"hidden_dim": 64}, "b": {"hidden_dim": 32},
                 "c": {"hidden_dim": 16}},
    "leaderboard": {"rows": ["variant"], "columns": "num_layers", "metric": "test"},
}


def seconds(cells):
    return estimated_group_seconds([c.config for c in cells])


def test_skewed_suite_is_split_into_balanced_shards():
    groups = parse_suite(SKEWED).groups()
    cost = {g: seconds(cells) for g, cells in groups.items()}
    heavy = next(g for g, cells in groups.items() if cells[0].config["run"]["variant"] == "heavy")
    assert cost[heavy] > sum(v for g, v in cost.items() if g != heavy)  # the skew
    shards = [sel.shard_groups(groups, i, 2) for i in (1, 2)]
    assert sorted(g for s in shards for g in s) == sorted(groups)  # a partition
    assert [heavy] in shards  # the heavy group alone; the three light ones together
    loads = [sum(cost[g] for g in s) for s in shards]
    best = max(max(cost.values()), sum(cost.values()) / 2)
    assert max(loads) <= 4 / 3 * best  # LPT's bound, measured by the model
    # the old cost (nodes + edges x layers x epochs x replicas) saw four equal groups
    old = {g: size_cost(cells[0].config, len(cells)) for g, cells in groups.items()}
    assert len(set(old.values())) == 1


def test_workers_take_the_longest_group_first():
    from zoo.bench.run.driver import make_jobs
    from zoo.bench.run.options import RunOptions

    suite = parse_suite(SKEWED)
    jobs = make_jobs(suite, suite.cells, RunOptions(device="cpu"))
    assert [j.cost for j in jobs] == [seconds(j.cells) for j in jobs]
    first = sorted(jobs, key=lambda j: (-j.cost, j.index))[0]  # the order run_suite gives a pool
    assert first.cells[0].config["run"]["variant"] == "heavy"
