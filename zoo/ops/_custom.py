"""Plumbing shared by the edge operations: custom-op availability, batched-tensor test, and the
helpers the ``torch.func.vmap`` rules use to fold the replica dimension into the heads.

The zoo trains many replicas of one architecture at once by vmapping a functional call over
stacked parameters; every edge op here has a plain path (outside vmap: no custom-op dispatch
cost) and a custom op whose vmap rule runs the op once on the physical tensor.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Optional, Sequence

import torch
from torch import Tensor

# torch.library.custom_op / register_vmap exist from torch 2.5; older versions use plain ops.
HAS_CUSTOM_OPS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_vmap")

# Outside vmap the plain aten ops are used: a custom op costs a Python dispatch per call.
is_batched = (getattr(torch._C._functorch, "is_batchedtensor", lambda t: True) if HAS_CUSTOM_OPS
              else (lambda t: False))


@contextmanager
def quiet_sparse() -> Iterator[None]:
    """Silence "sparse CSR support is in beta": the CSR ops used here are stable."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def no_vmap_randomness() -> Any:
    """A guard under which random draws are plain tensor ops, outside vmap's randomness handling."""
    key = getattr(torch._C.DispatchKey, "FuncTorchVmapMode", None)
    if key is None:
        return nullcontext()
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key))


def fold(t: Tensor, dim: Optional[int], batch: int) -> Tensor:
    """Replica dim to position 1, merged into the heads: ``(E|N, R, H, ...)`` -> ``(E|N, R*H, ...)``."""
    t = t.movedim(dim, 1) if dim is not None else t.unsqueeze(1).expand(t.shape[0], batch, *t.shape[1:])
    return t.reshape(t.shape[0], -1, *t.shape[3:])


def unfold(t: Tensor, batch: int) -> Tensor:
    """Inverse of :func:`fold`: ``(E|N, R*H, ...)`` -> ``(E|N, R, H, ...)``."""
    return t.view(t.shape[0], batch, t.shape[1] // batch, *t.shape[2:])


def shared_graph(dst_dim: Optional[int], order_dims: Sequence[Optional[int]]) -> None:
    """Refuse per-replica graphs under vmap: the fused ops fold replicas into the heads of one graph."""
    if dst_dim is not None or any(d is not None for d in order_dims):
        raise ValueError("edge_attention under vmap: the graph must be shared by all replicas "
                         "(vmap over parameters and features, not over edge indices)")


__all__ = ["HAS_CUSTOM_OPS", "is_batched", "quiet_sparse", "no_vmap_randomness", "fold", "unfold", "shared_graph"]
