"""The light/heavy degree buckets of the Triton kernels (no Triton needed): a partition of the rows
at the threshold, heaviest rows first, computed once per row pointer and dropped with it."""
from __future__ import annotations

import gc

import pytest
import torch

from tests.ops.compiled.cases import hub_graph
from zoo.ops._compiled import degree_buckets as buckets
from zoo.ops.aggregate import edge_orders


def _crow(degrees):
    crow = torch.zeros(len(degrees) + 1, dtype=torch.long)
    crow[1:] = torch.tensor(degrees).cumsum(0)
    return crow


def test_rows_split_at_the_block_into_light_and_heaviest_first():
    split = buckets.split_by_degree(_crow([0, 3, 9, 4, 5, 12, 1]), block=4)
    assert split.light.tolist() == [0, 1, 3, 6]  # degree <= 4, the isolated row 0 included, in row order
    assert split.heavy.tolist() == [5, 2, 4]  # degree > 4, heaviest first
    assert split.light.dtype == split.heavy.dtype == torch.int64


def test_the_hub_graph_has_both_buckets_in_both_directions():
    edge_index, n = hub_graph(extra=6)
    perm, crow, col, perm_s, crow_s, col_s = edge_orders(edge_index[0], edge_index[1], n)
    for row_pointer, hub_degree in ((crow, 7), (crow_s, 5)):
        split = buckets.split_by_degree(row_pointer, block=4)
        assert sorted(split.light.tolist() + split.heavy.tolist()) == list(range(n))
        assert split.heavy.tolist() == [7]
        assert int(row_pointer[8] - row_pointer[7]) == hub_degree


def test_computed_once_per_row_pointer_and_block(monkeypatch):
    calls = []
    original = buckets.split_by_degree
    monkeypatch.setattr(buckets, "split_by_degree", lambda crow, block: calls.append(block) or original(crow, block))
    crow = _crow([1, 6, 2])
    first = buckets.degree_buckets(crow, 4)
    assert buckets.degree_buckets(crow, 4) is first
    assert buckets.degree_buckets(crow, 2) is not first  # another block size: another split
    assert buckets.degree_buckets(crow.clone(), 4) is not first  # another graph, even with equal values
    assert calls == [4, 2, 4]


def test_the_cache_lets_go_of_a_dead_graph():
    crow = _crow([1, 6, 2])
    buckets.degree_buckets(crow, 4)
    size = len(buckets._CACHE)
    del crow
    gc.collect()
    assert len(buckets._CACHE) == size - 1


def test_a_block_below_one_is_refused_in_one_line():
    with pytest.raises(ValueError, match="block must be >= 1"):
        buckets.split_by_degree(_crow([1]), block=0)
