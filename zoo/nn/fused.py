"""Old home of the fused softmax + aggregation, kept for one release: import from :mod:`zoo.ops`.

Re-exports only.  The ``ENABLED`` flag and ``FUSED_MIN_ELEMENTS`` patching are replaced by the
switch :func:`zoo.ops.set_fused` / :func:`zoo.ops.fused` (``min_elements=...``) / ``ZOO_FUSED=0``.
"""
from typing import Any

from torch import Tensor

from zoo.ops.aggregate import edge_attention, edge_orders, graph_orders
from zoo.ops.config import FUSED_MIN_ELEMENTS, use_fused as _switch  # noqa: F401
from zoo.ops.dispatch import dropout_active, fuses_aggregation


def use_fused(layer: Any, graph: Any, values: Tensor) -> bool:
    """Whether :func:`zoo.ops.attention` aggregates ``values`` (``(N, H, C)``) over ``graph`` with
    :func:`edge_attention` for ``layer`` (``attn_dropout``, ``training``)."""
    return fuses_aggregation(graph.num_edges, values, dropout_active(layer.attn_dropout, layer.training), _switch())


__all__ = ["edge_attention", "edge_orders", "graph_orders", "use_fused"]
