"""Plumbing shared by the edge operations: custom-op availability and definition (:func:`custom_op`:
no ``torch._dynamo`` import until something else imports it), batched-tensor test, and the
helpers the ``torch.func.vmap`` rules use to fold the replica dimension into the heads.

The zoo trains many replicas of one architecture at once by vmapping a functional call over
stacked parameters; every edge op here has a plain path (outside vmap: no custom-op dispatch
cost) and a custom op whose vmap rule runs the op once on the physical tensor.
"""
from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence

import torch
from torch import Tensor

# torch.library.custom_op / register_vmap exist from torch 2.4 (the DGL environment's torch 2.2
# lacks them): without them every op takes its plain path, and under vmap the dispatch keeps the
# fused kernels off (their autograd.Functions have no vmap rule there) — the same numbers
# (tests/ops/test_fallback.py).
HAS_CUSTOM_OPS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_vmap")

_is_batchedtensor = getattr(getattr(torch._C, "_functorch", None), "is_batchedtensor", None)


class Switch:
    """An on / off flag that hot paths read as an attribute; :meth:`off` turns it off for a ``with``
    block (tests run the other path on the same torch to compare the two)."""

    def __init__(self, active: bool) -> None:
        self.active = active

    @contextmanager
    def off(self) -> Iterator[None]:
        before, self.active = self.active, False
        try:
            yield
        finally:
            self.active = before


#: whether the registered custom ops are used (tests turn them off to run the fallback on any torch)
_SWITCH = Switch(HAS_CUSTOM_OPS)


def custom_ops_active() -> bool:
    """The custom ops exist and are in use (see :func:`custom_ops_disabled`)."""
    return _SWITCH.active


def custom_ops_disabled() -> ContextManager[None]:
    """Run the torch < 2.4 path — plain ops, no custom-op vmap rules — on this torch (tests)."""
    return _SWITCH.off()


def custom_op(name: str) -> Callable[[Callable[..., Any]], Any]:
    """``torch.library.custom_op(name, mutates_args=())`` whose kernel imports ``torch._dynamo`` only
    once something else has (:func:`defer_dynamo`)."""
    def define(fn: Callable[..., Any]) -> Any:
        return defer_dynamo(torch.library.custom_op(name, mutates_args=())(fn))
    return define


def defer_dynamo(op: Any) -> Any:
    """``op`` (a ``torch.library.custom_op``) with its kernels run outside ``torch._dynamo``'s
    ``disable`` for as long as ``torch._dynamo`` is not imported; returns ``op``.

    torch wraps a custom op's kernels in ``torch._disable_dynamo``, which imports ``torch._dynamo``
    (with sympy and the compiler's modules) at the first call, so that a compiled region does not trace
    into the kernel; the wrapper skips the import when the kernel carries its own ``__dynamo_disable``.
    Until ``torch._dynamo`` is imported nothing can be compiling, so the kernel is called as it is;
    from the first call after that import on, torch's wrapper takes over (it builds and keeps its
    ``disable``).  On a torch whose custom ops are built otherwise this changes nothing (the ops then
    import ``torch._dynamo`` as before; tests/ops/test_custom_op_dynamo.py says so).
    """
    for kernel in list(getattr(op, "_backend_fns", {}).values()):
        raw = getattr(kernel, "__wrapped__", None)
        if raw is not None and getattr(raw, "__dynamo_disable", None) is None:
            setattr(raw, "__dynamo_disable", _until_dynamo(raw, kernel))
    return op


def _until_dynamo(raw: Callable[..., Any], kernel: Callable[..., Any]) -> Callable[..., Any]:
    """``raw`` itself while ``torch._dynamo`` is not imported; after that, hands over to torch's
    ``kernel`` wrapper (it then disables dynamo inside ``raw`` as usual)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if "torch._dynamo" not in sys.modules:
            return raw(*args, **kwargs)
        vars(raw).pop("__dynamo_disable", None)
        return kernel(*args, **kwargs)
    return call


def under_vmap(t: Optional[Tensor]) -> bool:
    """``t`` is a tensor batched by ``torch.func.vmap`` (whatever the custom ops)."""
    return t is not None and _is_batchedtensor is not None and _is_batchedtensor(t)


def is_batched(t: Tensor) -> bool:
    """``t`` is batched by vmap *and* the custom ops' vmap rules are there to take it; outside vmap
    the plain aten ops are used (a custom op costs a Python dispatch per call)."""
    return _SWITCH.active and under_vmap(t)


def vmap_without_rules(*tensors: Optional[Tensor]) -> bool:
    """Under vmap with no custom-op vmap rules (torch < 2.4): the fused kernels must stay off."""
    return not _SWITCH.active and any(under_vmap(t) for t in tensors)


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


__all__ = ["HAS_CUSTOM_OPS", "custom_op", "defer_dynamo", "custom_ops_active", "custom_ops_disabled", "under_vmap",
           "is_batched", "vmap_without_rules", "quiet_sparse", "no_vmap_randomness", "fold", "unfold", "shared_graph"]
