"""A custom op's vmap rule and autograd formula called directly, under exactly one ``torch.func.vmap``.

The stacked replicas run every edge op once per epoch under ``vmap``.  Through the dispatcher, a
custom op's call there passes torch.library's layers in Python: the ``FuncTorchBatched`` kernel of
``register_vmap`` (functorch's ``autograd.Function`` vmap helper, which flattens the arguments and
outputs as pytrees), then the op again on the physical tensors, whose ``Autograd`` kernel builds a
generated ``autograd.Function`` (through functorch's ``custom_function_call``, since a transform is
active), fills the schema's defaults and redispatches.  :func:`vmapped` does what those layers do
for the common case — one vmap level, nothing else transformed — in a few calls: it unwraps the
batched arguments, runs the op's vmap rule on the physical tensors with the vmap layer popped, so
that the rule's op calls are plain eager calls, and batches the outputs again; :class:`Formula`
with :func:`direct_op` gives the rule an op that applies the kernel below autograd with the
registered formula as its backward.  The kernels, their arguments and the autograd graph (one
node per op call, the same inputs in the same order) are those of the dispatched call, so the
numbers are the same bit for bit (tests/ops/test_direct.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._custom import Switch

_functorch = getattr(torch._C, "_functorch", None)
#: the functorch calls :func:`vmapped` needs (torch >= 2.4 has them all)
_NEEDED = ("get_dynamic_layer_stack_depth", "peek_interpreter_stack", "pop_dynamic_layer_stack",
           "push_dynamic_layer_stack", "_unwrap_batched", "_add_batch_dim", "CVmapInterpreterPtr")
AVAILABLE = _functorch is not None and all(hasattr(_functorch, n) for n in _NEEDED)


#: whether :func:`vmapped` takes calls (tests turn it off to compare with the dispatched path)
_SWITCH = Switch(AVAILABLE)


def dispatched() -> ContextManager[None]:
    """Every call through the dispatcher, as without this module (tests)."""
    return _SWITCH.off()


@dataclass(frozen=True)
class VmapInfo:
    """What a vmap rule reads of its vmap level (``torch.library.register_vmap``'s ``info``)."""

    batch_size: int
    randomness: str


_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def _randomness(kind: Any) -> str:
    return {"Error": "error", "Same": "same", "Different": "different"}[kind.name]


def vmapped(rule: Callable[..., Tuple[Any, Any]], args: Sequence[Any]) -> Any:
    """``rule(info, in_dims, *physical args)`` for a call under exactly one ``torch.func.vmap``, with
    its outputs batched again at that level (as ``torch.library.register_vmap`` does: the rule returns
    ``(output, out_dim)`` or ``(outputs, out_dims)``, and this the output or the tuple); ``None`` when
    the call is under no vmap, under nested transforms, has no argument batched at the level, or is
    being traced by ``torch.compile`` (to which the op stays opaque): the caller then calls the op
    through the dispatcher."""
    if not _SWITCH.active or _functorch.get_dynamic_layer_stack_depth() != 1 or _compiling():
        return None
    top = _functorch.peek_interpreter_stack()
    if top is None or top.key() != _functorch.TransformType.Vmap:
        return None
    level = top.level()
    pairs = [_functorch._unwrap_batched(a, level) if isinstance(a, Tensor) else (a, None) for a in args]
    dims = [d for _, d in pairs]
    if all(d is None for d in dims):
        return None
    vmap = _functorch.CVmapInterpreterPtr(top)
    info = VmapInfo(vmap.batchSize(), _randomness(vmap.randomness()))
    saved = _functorch.pop_dynamic_layer_stack()  # the rule's calls see no transform
    try:
        outs, out_dims = rule(info, dims, *[t for t, _ in pairs])
    finally:
        _functorch.push_dynamic_layer_stack(saved)
    if isinstance(outs, Tensor):
        return _batched(outs, out_dims, level)
    return tuple(_batched(o, d, level) for o, d in zip(outs, out_dims))


def untransformed() -> bool:
    """Whether a plain call may take a direct form (:func:`direct_op`) instead of the dispatched op: this
    module on, no functorch transform active, nothing being traced by ``torch.compile``."""
    return _SWITCH.active and _functorch.get_dynamic_layer_stack_depth() == 0 and not _compiling()


def call(op: Callable[..., Any], rule: Callable[..., Tuple[Any, Any]], args: Sequence[Any]) -> Any:
    """``op(*args)``, with ``rule`` (``op``'s vmap rule over direct forms) run by :func:`vmapped` instead
    where it takes the call: the stacked replicas' path without the op's dispatch."""
    done = vmapped(rule, args)
    return done if done is not None else op(*args)


def _batched(t: Any, dim: Optional[int], level: int) -> Any:
    return t if dim is None else _functorch._add_batch_dim(t, dim, level)


@dataclass(frozen=True)
class Formula:
    """An op's kernel (called below autograd) and its autograd formula, as given to
    ``torch.library.register_autograd``: ``setup(ctx, inputs, output)`` and ``backward(ctx, *grads)``."""

    kernel: Callable[..., Any]
    setup: Callable[[Any, Tuple[Any, ...], Any], None]
    backward: Callable[..., Tuple[Optional[Tensor], ...]]


class _Direct(torch.autograd.Function):
    """One autograd node per call: the kernel's outputs, the formula's gradients (``None`` for the
    formula itself).  Unused outputs get zero gradients, as in torch.library's generated function."""

    @staticmethod
    def forward(ctx: Any, formula: Formula, *args: Any) -> Any:
        out = formula.kernel(*args)
        formula.setup(ctx, args, out)
        ctx.formula = formula
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Tuple[Optional[Tensor], ...]:
        return (None, *ctx.formula.backward(ctx, *grads))


def direct_op(formula: Formula) -> Callable[..., Any]:
    """The op as a callable for a vmap rule run by :func:`vmapped`: differentiable through ``formula``
    when grad mode is on and a tensor argument needs a gradient, else the bare kernel (every
    argument passed explicitly: the formula's ``setup`` sees them all)."""
    def call(*args: Any) -> Any:
        if torch.is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return _Direct.apply(formula, *args)
        return formula.kernel(*args)
    return call


def below_autograd(ops: Any, name: str) -> Callable[..., Any]:
    """The op ``name`` of the namespace ``ops`` (looked up at each call, as the dispatched path does)
    called with autograd's keys excluded: its backend kernel alone."""
    def call(*args: Any) -> Any:
        with torch._C._AutoDispatchBelowAutograd():
            return getattr(ops, name)(*args)
    return call


__all__ = ["AVAILABLE", "dispatched", "VmapInfo", "vmapped", "untransformed", "call", "Formula", "direct_op", "below_autograd"]
