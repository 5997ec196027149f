"""Old home of the edge primitives, kept for one release: import from :mod:`zoo.ops` instead.

Re-exports only (from :mod:`zoo.ops.segment`, :mod:`zoo.ops.message`, :mod:`zoo.ops.sparse_linear`,
:mod:`zoo.ops.dropout`).  Module constants such as ``SPARSE_MIN_ELEMENTS`` now live (and are
patched) in their new modules.
"""
from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS  # noqa: F401
from zoo.ops._custom import is_batched as _is_batched  # noqa: F401
from zoo.ops.dropout import ReplicaRandomness, active_replica_randomness, dropout, replica_randomness
from zoo.ops.message import leaky_relu_dot, node_scores, weight_messages
from zoo.ops.segment import gather_rows, segment_max, segment_softmax, segment_sum
from zoo.ops.sparse_linear import SPARSE_MAX_DENSITY, SPARSE_MIN_ELEMENTS, linear  # noqa: F401

__all__ = ["gather_rows", "segment_sum", "segment_max", "segment_softmax", "dropout", "linear",
           "ReplicaRandomness", "replica_randomness", "active_replica_randomness", "leaky_relu_dot",
           "weight_messages", "node_scores"]
