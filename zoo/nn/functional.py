"""Edge-wise primitives written with out-of-place ops so that ``torch.func.vmap`` can batch them.

The benchmark runner trains many replicas of one architecture at once by vmapping a
functional call over stacked parameters; in-place scatters on freshly allocated tensors
(as in ``torch_geometric.utils.softmax``) cannot be batched, the out-of-place forms below can.
"""
from __future__ import annotations

import torch
from torch import Tensor


def segment_sum(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Sum the rows of ``values`` (``(E, ...)``) into ``num_segments`` buckets given by ``index`` (``(E,)``)."""
    out = values.new_zeros((num_segments,) + tuple(values.shape[1:]))
    return out.index_add(0, index, values)


def segment_max(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Per-bucket maximum of ``values`` (``(E, H)``); empty buckets hold ``-inf``."""
    out = values.new_full((num_segments,) + tuple(values.shape[1:]), float("-inf"))
    idx = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce="amax", include_self=True)


def segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    r"""Softmax of edge ``scores`` over the edges that share a destination.

    .. math:: \alpha_{uv} = \frac{\exp(e_{uv} - m_v)}{\sum_{u' \in \mathcal N(v)} \exp(e_{u'v} - m_v)},
              \quad m_v = \max_{u \in \mathcal N(v)} e_{uv}

    Shapes:
        scores: ``(E, H)``; index: ``(E,)`` destination of each edge; returns ``(E, H)``.
    """
    # The shift m_v does not change the softmax, so it needs no gradient (as in PyG).
    shift = segment_max(scores.detach(), index, num_segments).index_select(0, index)
    weights = (scores - shift).exp()
    denom = segment_sum(weights, index, num_segments).index_select(0, index)
    return weights / (denom + 1e-16)
