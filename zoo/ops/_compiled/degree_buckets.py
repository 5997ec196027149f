"""Light and heavy rows of a CSR graph, for the Triton attention kernels (one launch per bucket).

A *light* row (degree <= ``block``, isolated rows included) fits one block of edges: its program
loads the whole row at once, with no loop and no online-softmax rescaling.  A *heavy* row loops
over its edges in blocks.  Splitting the rows keeps the many short rows of a real graph from
paying for the loop that its few hubs need, and lets the hubs start first (heaviest first).

The split needs the degrees on the host (``nonzero``: a synchronisation on a GPU), so it is made
once per graph, with the graph's other arguments of the ops (:func:`zoo.ops._compiled.ops.graph_arguments`,
cached on the graph), and passed to every call.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class DegreeBuckets:
    """Row ids (int64, on the graph's device) of the light and the heavy rows of one CSR."""

    light: Tensor  #: degree <= block, in row order (neighbouring rows stay together in memory)
    heavy: Tensor  #: degree > block, heaviest first (the longest programs start first)
    block: int


def split_by_degree(crow: Tensor, block: int) -> DegreeBuckets:
    """The light/heavy split of the rows of ``crow`` (``(N + 1,)`` CSR row pointer)."""
    if block < 1:
        raise ValueError(f"degree buckets: block must be >= 1, got {block}; pass the kernels' edge block size")
    degree = crow[1:] - crow[:-1]
    heavy = torch.nonzero(degree > block).flatten()
    heavy = heavy.index_select(0, torch.argsort(degree.index_select(0, heavy), descending=True, stable=True))
    return DegreeBuckets(torch.nonzero(degree <= block).flatten(), heavy, block)
