"""Entry points of the compiled attention: pick the backend for the inputs' device, call its op.

``gatv2_attention`` / ``gat_attention`` return ``(out, alpha)`` like the plain path, or raise
:class:`KernelsUnavailable` when no compiled backend serves the device (the caller then keeps the
plain torch ops: :func:`available` asks first).  The graph comes as the ops take it, every per-graph
tensor built beforehand (:func:`graph_arguments`; :func:`graph_arguments_of` builds it once per
:class:`zoo.graph.Graph` and device, in the graph's cache), so that a call computes nothing from the
graph: the CSR by destination and by source, and for the Triton ops the light / heavy degree buckets
of both (:mod:`.degree_buckets`), whose split needs a host synchronisation (``nonzero``).
"""
from __future__ import annotations

import functools
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._compiled import build, rules
from zoo.ops._custom import under_vmap
from zoo.ops._direct import call, untransformed
from zoo.ops._compiled.degree_buckets import split_by_degree
from zoo.ops.aggregate import graph_orders
from zoo._allocator import request_huge_pages


class KernelsUnavailable(RuntimeError):
    """No compiled attention backend for this device (no compiler, no Triton, or ZOO_KERNELS=off)."""


@functools.lru_cache(maxsize=None)
def _cpu_ops() -> Optional[Any]:
    if not build._load_cpu_kernels():
        return None
    rules.register("zoo_kernels", replica_major=True, gatv2_saves_per_edge=True)
    return torch.ops.zoo_kernels


@functools.lru_cache(maxsize=None)
def _cpu_direct_rules() -> Dict[str, Any]:
    return rules.direct_rules("zoo_kernels", replica_major=True)


@functools.lru_cache(maxsize=None)
def _triton_ops() -> Optional[Any]:
    try:
        from zoo.ops._compiled import triton_attention
    except ImportError:  # no triton installed: the plain path on CUDA
        return None
    return triton_attention.ops()


def backend(device: torch.device) -> Optional[Any]:
    """The ``torch.ops`` namespace serving ``device``, or None (also while ``ZOO_KERNELS=off``, and on a
    torch too old to register the ops' rules: :func:`zoo.ops._compiled.rules.unavailable_reason`)."""
    if build.kernels_disabled() or rules.unavailable_reason() is not None:
        return None  # on a torch without torch.library.register_fake: not available, nothing is built
    if device.type == "cpu":
        return _cpu_ops()
    if device.type == "cuda":
        return _triton_ops()
    return None


def available(device: torch.device) -> bool:
    """Whether the compiled attention serves tensors on ``device`` (builds the CPU one at first call)."""
    return backend(device) is not None


def graph_arguments(orders: Sequence[Tensor], triton: bool) -> Tuple[Tensor, ...]:
    """The graph's arguments of the compiled ops from its two CSR layouts (``orders``:
    :func:`zoo.ops.aggregate.edge_orders`, ``(perm, crow, col, perm_s, crow_s, col_s)``):
    ``(crow, col, perm, crow_s, col_s, perm_s)``, and for the Triton ops (``triton``) the light and
    heavy rows of each, ``(light, heavy, light_s, heavy_s)`` at the kernels' block size."""
    perm, crow, col, perm_s, crow_s, col_s = orders
    args: Tuple[Tensor, ...] = (crow, col, perm, crow_s, col_s, perm_s)
    if triton:
        from zoo.ops._compiled import triton_attention  # only where triton is installed

        for row_pointer in (crow, crow_s):
            split = split_by_degree(row_pointer, triton_attention.BLOCK_E)
            args += (split.light, split.heavy)
    return args


def graph_arguments_of(graph: Any) -> Tuple[Tensor, ...]:
    """:func:`graph_arguments` of a :class:`zoo.graph.Graph` for the backend of its device, built once
    per graph and device (the graph's cache; a changed graph is a new :class:`~zoo.graph.Graph`)."""
    triton = graph.device.type == "cuda"
    return graph.cached("compiled_attention_arguments", lambda: graph_arguments(graph_orders(graph), triton))


def _ops_for(t: Tensor) -> Any:
    ops = backend(t.device)
    if ops is None:
        raise KernelsUnavailable(f"no compiled attention kernels for {t.device} tensors; use the plain ops "
                                 "(check zoo.ops._compiled.ops.available first)")
    return ops


def _forward(name: str, values: Tensor, args: Tuple[Any, ...]) -> Tuple[Tensor, Tensor, Tensor]:
    """The op ``name`` of ``values``' backend on ``args``; on the CPU under one vmap (the stacked
    replicas), its vmap rule and formula called directly (:mod:`zoo.ops._direct`: the same kernels and
    numbers, without torch.library's Python layers per call)."""
    op = getattr(_ops_for(values), name)
    if values.device.type == "cpu":
        _huge_pages_for(values)
        if under_vmap(values):
            return call(op, _cpu_direct_rules()[name], args)
        if name == "gatv2_forward" and _plain_shared(args):
            x, _, _, att, *rest = args
            return _cpu_shared_gatv2()(x, att, *rest)
    return op(*args)


@functools.lru_cache(maxsize=None)
def _cpu_shared_gatv2() -> Any:
    return rules.shared_gatv2_op("zoo_kernels")


def _plain_shared(args: Tuple[Any, ...]) -> bool:
    """A plain call (no transform, not traced) of GATv2 with one tensor as x_src, x_dst and values
    (shared weights): it takes the stacked replicas' autograd node of that tensor
    (:func:`.rules.shared_gatv2_formula`), so that its gradient is summed in their order, ``(d values
    + d x_dst) + d x_src``.  Through the dispatcher the op's three gradients reached the one input in
    the op's output order, ``(d x_src + d x_dst) + d values``: another rounding, and one replica
    trained alone (or unstacked) drifted from the same replica trained stacked beside others."""
    return args[0] is args[1] is args[2] and untransformed()


def _huge_pages_for(values: Tensor) -> None:
    """Ask for 2 MiB pages (:func:`zoo._allocator.request_huge_pages`: once per process, where the
    allocator is tuned) when one replica's values exceed the cache budget (:data:`.rules.FOLD_MAX_BYTES`):
    the kernels' per-edge row gathers then jump over tens of MB, where 4 KiB pages missed the TLB on
    nearly every row (Amazon Computers' first layer: 15-25 % of the kernels' time).  Smaller graphs
    keep 4 KiB pages: nothing to gain there, and a 2 MiB page costs a 2 MiB zeroing at first touch."""
    if values.numel() * values.element_size() > rules.FOLD_MAX_BYTES:
        request_huge_pages()


def takes_keep(device: torch.device) -> bool:
    """Whether the backend serving ``device`` applies attention dropout's keep mask inside the op (the
    C++ ops; the Triton ops do not: attention dropout keeps the torch ops on CUDA)."""
    return device.type == "cpu" and available(device)


def _keep_args(keep: Optional[Tensor], values: Tensor) -> Tuple[Any, ...]:
    """The trailing ``(replicas_outer, keep)`` of a call with a keep mask (C++ ops only)."""
    if keep is None:
        return ()
    if not takes_keep(values.device):
        raise KernelsUnavailable(f"the compiled attention on {values.device} takes no keep mask; use the plain ops")
    return (False, keep)


def gatv2_attention(x_src: Tensor, x_dst: Tensor, values: Tensor, att: Tensor, negative_slope: float,
                    graph: Sequence[Tensor], keep: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""GATv2's attention in one op: ``e_uv = a^T LeakyReLU(x_src[u] + x_dst[v])`` per head,
    ``alpha = softmax_u e_uv``, ``out_v = sum_u alpha_uv k_uv values[u]``, with ``k`` attention dropout's
    scaled keep mask (``keep``; ``None``: 1).

    Shapes: x_src, x_dst ``(N, H, C)``; values ``(N, H, Cv)``; att ``(H, C)``; keep ``(E, H)`` (original
    edge order); graph: the graph's arguments for the backend (:func:`graph_arguments`) -> out
    ``(N, H, Cv)``, alpha ``(E, H)`` (original edge order, before the mask).
    """
    out, alpha, _ = _forward("gatv2_forward", values, (x_src, x_dst, values, att, *graph, float(negative_slope),
                                                       *_keep_args(keep, values)))
    return out, alpha


def gat_attention(score_src: Tensor, score_dst: Tensor, bias: Optional[Tensor], values: Tensor,
                  negative_slope: float, graph: Sequence[Tensor], keep: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""GAT's attention in one op: ``e_uv = LeakyReLU(score_src[u] + score_dst[v] [+ bias_uv])``,
    ``alpha = softmax_u e_uv``, ``out_v = sum_u alpha_uv k_uv values[u]`` (GATDB / GATNB: ``bias``;
    ``keep``: as :func:`gatv2_attention`).

    Shapes: score_src, score_dst ``(N, H)``; bias, keep ``(E, H)`` or None; values ``(N, H, Cv)`` ->
    out ``(N, H, Cv)``, alpha ``(E, H)`` (original edge order); graph: as :func:`gatv2_attention`.
    """
    out, alpha, _ = _forward("gat_forward", values, (score_src, score_dst, bias, values, *graph,
                                                     float(negative_slope), *_keep_args(keep, values)))
    return out, alpha
