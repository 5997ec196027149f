"""A one-hot node-degree block that every layer reads beside its (dropped-out) input.

The Oxford report's Table 4 variant (d) adds "one-hot-encoded node degrees to each node's feature
vector" (§5.2).  Read as the text, the degrees are input columns and the input dropout drops them
with the rest (``degree_onehot`` with ``cat = true``, :mod:`zoo.datasets.transforms`).  The
report's benchmark code (github samuelbarrett1234/atml-group-11, ``damon/src/oxgat/components.py``
``MultiHeadAttentionLayerWithDegrees``) instead appends ``OneHotDegree(max_degree)`` inside every
attention layer, after that layer's dropout, so the degree columns are never dropped.
:class:`zoo.nn.base.DeepGNN` offers that form as ``layer_degree_onehot = max_degree``.
"""
from __future__ import annotations

import torch
from torch import Tensor

from zoo.graph import Graph


def degree_block(graph: Graph, max_degree: int, dtype: torch.dtype) -> Tensor:
    """``(N, max_degree + 1)`` one-hot out-degrees of ``graph``, self-loops not counted (the code's
    ``OneHotDegree`` on the raw edges); cached on the graph, so the range check runs once per graph."""

    def compute() -> Tensor:
        src, dst = graph.edge_index
        counts = torch.bincount(src[src != dst], minlength=graph.num_nodes)
        largest = int(counts.max()) if graph.num_nodes else 0
        if largest > max_degree:
            raise ValueError(f"a node has degree {largest} but layer_degree_onehot={max_degree}; set "
                             f"layer_degree_onehot to the graph's largest degree (>= {largest})")
        return torch.nn.functional.one_hot(counts, max_degree + 1).to(dtype)

    return graph.cached(f"layer_degree_onehot:{max_degree}", compute, dtype=dtype)
