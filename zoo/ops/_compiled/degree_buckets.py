"""Light and heavy rows of a CSR graph, for the Triton attention kernels (one launch per bucket).

A *light* row (degree <= ``block``, isolated rows included) fits one block of edges: its program
loads the whole row at once, with no loop and no online-softmax rescaling.  A *heavy* row loops
over its edges in blocks.  Splitting the rows keeps the many short rows of a real graph from
paying for the loop that its few hubs need, and lets the hubs start first (heaviest first).

The split is computed once per graph: it is cached on the CSR row pointer, which the graph's own
cache keeps alive (:func:`zoo.ops.aggregate.graph_orders`); the ops receive tensors only, so the
row pointer is the graph's identity here (the same scheme as ``aggregate._block_layout``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary


@dataclass(frozen=True)
class DegreeBuckets:
    """Row ids (int64, on the graph's device) of the light and the heavy rows of one CSR."""

    light: Tensor  #: degree <= block, in row order (neighbouring rows stay together in memory)
    heavy: Tensor  #: degree > block, heaviest first (the longest programs start first)
    block: int


#: crow tensor -> {block: buckets}; entries vanish with their graph's row pointer.
_CACHE: WeakIdKeyDictionary = WeakIdKeyDictionary()


def split_by_degree(crow: Tensor, block: int) -> DegreeBuckets:
    """The light/heavy split of the rows of ``crow`` (``(N + 1,)`` CSR row pointer)."""
    if block < 1:
        raise ValueError(f"degree buckets: block must be >= 1, got {block}; pass the kernels' edge block size")
    degree = crow[1:] - crow[:-1]
    heavy = torch.nonzero(degree > block).flatten()
    heavy = heavy.index_select(0, torch.argsort(degree.index_select(0, heavy), descending=True, stable=True))
    return DegreeBuckets(torch.nonzero(degree <= block).flatten(), heavy, block)


def degree_buckets(crow: Tensor, block: int) -> DegreeBuckets:
    """:func:`split_by_degree`, computed once per row pointer tensor and block size."""
    per_block: Dict[int, DegreeBuckets] = _CACHE.setdefault(crow, {})
    if block not in per_block:
        per_block[block] = split_by_degree(crow, block)
    return per_block[block]
