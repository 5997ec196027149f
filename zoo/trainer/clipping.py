"""Gradient clipping per replica: each replica's gradient scaled to a global 2-norm of at most ``max_norm``.

Replica ``r``'s norm is taken over its own slice ``g[r]`` of every stacked gradient — the global
norm ``torch.nn.utils.clip_grad_norm_`` takes over that replica's parameters alone — and its
gradients are multiplied by ``min(1, max_norm / (norm + 1e-6))`` (torch's formula, same ``1e-6``).
A non-finite norm gives non-finite gradients, as in torch with ``error_if_nonfinite=False`` (the
replica then diverges and stops).  Tensor ops only: no host read (the factor is clamped, not
branched on), so a CUDA graph may capture it.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import Tensor


def replica_grad_norms(grads: Sequence[Tensor]) -> Tensor:
    """``(R,)`` global 2-norm of each replica's gradients (in the gradients' dtype, as torch)."""
    per_tensor = [torch.linalg.vector_norm(g, 2, dim=tuple(range(1, g.dim()))) if g.dim() > 1 else g.abs()
                  for g in grads]
    return torch.linalg.vector_norm(torch.stack(per_tensor), 2, dim=0)


@torch.no_grad()
def clip_replica_grads(grads: Sequence[Tensor], max_norm: float) -> List[Tensor]:
    """``grads`` (stacked, leading replica dimension) with each replica's norm clipped to ``max_norm``;
    new tensors in the gradients' layout (their strides are kept)."""
    coef = torch.clamp(max_norm / (replica_grad_norms(grads) + 1e-6), max=1.0)
    return [g * coef.view(-1, *([1] * (g.dim() - 1))).to(g.dtype) for g in grads]
