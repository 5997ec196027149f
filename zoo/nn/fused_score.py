"""Old home of the fused attention scores, kept for one release: import from :mod:`zoo.ops`.

Re-exports only.  The ``ENABLED`` flag is replaced by the switch :func:`zoo.ops.set_fused` /
:func:`zoo.ops.fused` / ``ZOO_FUSED=0``; the chunk sizes live in :mod:`zoo.ops.score`.
"""
from zoo.ops.dispatch import fuses_gatv2_score as worth_it
from zoo.ops.score import gat_edge_scores, gatv2_score

__all__ = ["gat_edge_scores", "gatv2_score", "worth_it"]
