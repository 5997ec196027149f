"""Edge operations: every computation over a graph's edges, and the one dispatch that picks a kernel.

* :mod:`zoo.ops.segment` — gather / scatter / segment softmax (vmap-efficient custom ops);
* :mod:`zoo.ops.message` — per-edge products with their own backward;
* :mod:`zoo.ops.bounds` — per-destination maxima and divisors (LipschitzNorm's bound) as compiled edge ops;
* :mod:`zoo.ops.score` — the fused attention scores (GATv2, GAT);
* :mod:`zoo.ops.aggregate` — the fused softmax + aggregation as sparse products;
* :mod:`zoo.ops.sparse_linear` — the first layer's linear map on sparse constant inputs;
* :mod:`zoo.ops.propagate` — constant-coefficient propagation (GCN) as one CSR product;
* :mod:`zoo.ops.dropout` — dropout with one random stream per replica;
* :mod:`zoo.ops.dispatch` — :func:`gat_attention`, :func:`gatv2_attention` (what the layers
  call), :func:`attention`, :func:`gat_scores`, :func:`gatv2_scores`; thresholds and the
  attention-dropout rule live there;
* :mod:`zoo.ops._compiled` — the compiled attention (C++ / Triton) the dispatch prefers;
* :mod:`zoo.ops.config` — the switch: :func:`set_fused`, :func:`fused`, :func:`use_fused`,
  environment variable ``ZOO_FUSED``.

The package ``__init__`` only re-exports; the modules import each other, never the package.
"""
from zoo.ops.aggregate import edge_attention, edge_orders, graph_orders
from zoo.ops.config import FUSED_ENV, FUSED_MIN_ELEMENTS, FusedConfig, fused, set_fused, use_fused
from zoo.ops.dispatch import attention, gat_attention, gat_scores, gatv2_attention, gatv2_scores
from zoo.ops.dropout import ReplicaRandomness, active_replica_randomness, dropout, replica_randomness
from zoo.ops.message import leaky_relu_dot, node_scores, weight_messages
from zoo.ops.propagate import propagate
from zoo.ops.score import gat_edge_scores, gatv2_score
from zoo.ops.segment import gather_rows, segment_max, segment_softmax, segment_sum
from zoo.ops.sparse_linear import linear

__all__ = [
    "attention", "gat_scores", "gatv2_scores", "gat_attention", "gatv2_attention",
    "fused", "set_fused", "use_fused", "FusedConfig", "FUSED_ENV", "FUSED_MIN_ELEMENTS",
    "gather_rows", "segment_sum", "segment_max", "segment_softmax",
    "weight_messages", "leaky_relu_dot", "node_scores", "gat_edge_scores", "gatv2_score",
    "edge_attention", "edge_orders", "graph_orders", "linear", "propagate",
    "dropout", "ReplicaRandomness", "replica_randomness", "active_replica_randomness",
]
