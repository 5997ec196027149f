"""Entry points of the compiled attention: pick the backend for the inputs' device, call its op.

``gatv2_attention`` / ``gat_attention`` return ``(out, alpha)`` like the plain path, or raise
:class:`KernelsUnavailable` when no compiled backend serves the device (the caller then keeps the
plain torch ops: :func:`available` asks first).  The graph comes as :func:`zoo.ops.aggregate.graph_orders`
gives it, ``(perm, crow, col, perm_s, crow_s, col_s)``.
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._compiled import build, rules


class KernelsUnavailable(RuntimeError):
    """No compiled attention backend for this device (no compiler, no Triton, or ZOO_KERNELS=off)."""


@functools.lru_cache(maxsize=None)
def _cpu_ops() -> Optional[Any]:
    if not build._load_cpu_kernels():
        return None
    rules.register("zoo_kernels", replica_major=True)
    return torch.ops.zoo_kernels


@functools.lru_cache(maxsize=None)
def _triton_ops() -> Optional[Any]:
    try:
        from zoo.ops._compiled import triton_attention
    except ImportError:  # no triton installed: the plain path on CUDA
        return None
    return triton_attention.ops()


def backend(device: torch.device) -> Optional[Any]:
    """The ``torch.ops`` namespace serving ``device``, or None (also while ``ZOO_KERNELS=off``)."""
    if build.kernels_disabled():
        return None
    if device.type == "cpu":
        return _cpu_ops()
    if device.type == "cuda":
        return _triton_ops()
    return None


def available(device: torch.device) -> bool:
    """Whether the compiled attention serves tensors on ``device`` (builds the CPU one at first call)."""
    return backend(device) is not None


def _graph(orders: Sequence[Tensor]) -> Tuple[Tensor, ...]:
    perm, crow, col, perm_s, crow_s, col_s = orders
    return crow, col, perm, crow_s, col_s, perm_s


def _ops_for(t: Tensor) -> Any:
    ops = backend(t.device)
    if ops is None:
        raise KernelsUnavailable(f"no compiled attention kernels for {t.device} tensors; use the plain ops "
                                 "(check zoo.ops._compiled.ops.available first)")
    return ops


def gatv2_attention(x_src: Tensor, x_dst: Tensor, values: Tensor, att: Tensor, negative_slope: float,
                    orders: Sequence[Tensor]) -> Tuple[Tensor, Tensor]:
    r"""GATv2's attention in one op: ``e_uv = a^T LeakyReLU(x_src[u] + x_dst[v])`` per head,
    ``alpha = softmax_u e_uv``, ``out_v = sum_u alpha_uv values[u]``.

    Shapes: x_src, x_dst ``(N, H, C)``; values ``(N, H, Cv)``; att ``(H, C)``; orders: the
    graph's six CSR tensors -> out ``(N, H, Cv)``, alpha ``(E, H)`` (original edge order).
    """
    out, alpha, _ = _ops_for(values).gatv2_forward(x_src, x_dst, values, att, *_graph(orders), float(negative_slope))
    return out, alpha


def gat_attention(score_src: Tensor, score_dst: Tensor, bias: Optional[Tensor], values: Tensor,
                  negative_slope: float, orders: Sequence[Tensor]) -> Tuple[Tensor, Tensor]:
    r"""GAT's attention in one op: ``e_uv = LeakyReLU(score_src[u] + score_dst[v] [+ bias_uv])``,
    ``alpha = softmax_u e_uv``, ``out_v = sum_u alpha_uv values[u]`` (GATDB / GATNB: ``bias``).

    Shapes: score_src, score_dst ``(N, H)``; bias ``(E, H)`` or None; values ``(N, H, Cv)`` ->
    out ``(N, H, Cv)``, alpha ``(E, H)`` (original edge order).
    """
    out, alpha, _ = _ops_for(values).gat_forward(score_src, score_dst, bias, values, *_graph(orders),
                                                 float(negative_slope))
    return out, alpha
