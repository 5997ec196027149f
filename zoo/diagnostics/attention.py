r"""How each layer distributes its attention (GATE paper's diagnostic): per layer, the mean
self-attention :math:`\overline{\alpha_{vv}}` (1: the layer ignores the neighbours and acts as
a perceptron; ``1 / (deg + 1)`` for uniform attention) and the mean normalised entropy of every
node's attention over its incoming edges (1 = uniform).  Both read the coefficients that the
model returns with ``return_attention=True`` (:class:`zoo.nn.base.AttentionRecord`).
"""
from __future__ import annotations

import math
from typing import Dict, List

import torch
from torch import Tensor, nn

from zoo.graph import GraphLike

__all__ = ["self_attention", "attention_entropy", "attention_distribution"]


def self_attention(edge_index: Tensor, alpha: Tensor) -> float:
    """Mean over self-loop edges ``v -> v`` and heads of ``alpha`` (``(E, H)`` or ``(E,)``); nan
    when the graph has no self-loops."""
    loops = edge_index[0] == edge_index[1]
    if not bool(loops.any()):
        return math.nan
    return float(alpha.detach().double()[loops].mean())


def attention_entropy(edge_index: Tensor, alpha: Tensor, num_nodes: int) -> float:
    """Mean over nodes and heads of the entropy of a node's attention over its incoming edges,
    divided by ``log(in-degree)`` (1 = uniform attention; nodes of degree 1 left out; nan if none)."""
    dst = edge_index[1]
    a = alpha.detach().double().clamp_min(1e-300)
    if a.dim() == 1:
        a = a.unsqueeze(-1)
    plogp = -(a * a.log())
    h = plogp.new_zeros(num_nodes, a.size(1)).index_add(0, dst, plogp)
    deg = torch.zeros(num_nodes, dtype=torch.float64, device=a.device).index_add(
        0, dst, torch.ones_like(dst, dtype=torch.float64))
    keep = deg > 1
    if not bool(keep.any()):
        return math.nan
    return float((h[keep] / deg[keep].log().unsqueeze(-1)).mean())


def attention_distribution(model: nn.Module, graph: GraphLike, x: Tensor) -> Dict[str, List[float]]:
    """``{"self_attention": [per layer], "entropy": [per layer]}`` from one no-grad forward pass
    (the model's train/eval mode is left as it is)."""
    with torch.no_grad():
        _, records = model(graph, x, return_attention=True)
    n = x.size(0)
    return {"self_attention": [self_attention(r.edge_index, r.alpha) for r in records],
            "entropy": [attention_entropy(r.edge_index, r.alpha, n) for r in records]}
