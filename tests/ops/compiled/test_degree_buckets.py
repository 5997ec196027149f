"""The light/heavy degree buckets of the Triton kernels (no Triton needed): a partition of the rows
at the threshold, heaviest rows first (made once per graph: tests/ops/compiled/test_graph_arguments.py)."""
from __future__ import annotations

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


def test_a_block_below_one_is_refused_in_one_line():
    with pytest.raises(ValueError, match="block must be >= 1"):
        buckets.split_by_degree(_crow([1]), block=0)
