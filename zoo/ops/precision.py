"""The edge operations under autocast: they compute in float32, whatever autocast does around them.

The zoo's own kernels (the autograd Functions of :mod:`zoo.ops.message` / :mod:`zoo.ops.score`,
the sparse products of :mod:`zoo.ops.aggregate`, the compiled C++ / Triton attention) take one
floating dtype for all their operands; under ``torch.autocast`` a layer hands them a mix (a
bfloat16 projection beside a float32 attention vector) and their backward would fail on it.
:func:`float32_under_autocast` makes an entry point cast its low-precision floating arguments to
float32 and run with autocast off, as autocast itself runs softmax and reductions in float32 —
the attention's softmax and its segment sums are exactly those.  Outside autocast it calls the
function unchanged (one check of the autocast state per call).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, TypeVar

import torch
from torch import Tensor

F = TypeVar("F", bound=Callable[..., Any])
_LOW = (torch.bfloat16, torch.float16)


def autocast_on(device_type: str) -> bool:
    """Whether autocast is enabled for ``device_type`` here (torch < 2.4 has per-device functions)."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # pragma: no cover - torch < 2.4
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def _device_type(args: Any, kwargs: Any) -> Optional[str]:
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            return a.device.type
    return None


def _float32(a: Any) -> Any:
    if isinstance(a, Tensor) and a.dtype in _LOW:
        return a.float()
    if isinstance(a, (list, tuple)) and any(isinstance(t, Tensor) and t.dtype in _LOW for t in a):
        return type(a)(_float32(t) for t in a)
    return a


def float32_under_autocast(fn: F) -> F:
    """``fn`` with its bfloat16 / float16 tensor arguments cast to float32 and autocast off inside,
    when autocast is on for its tensors' device (see the module docstring)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        device_type = _device_type(args, kwargs)
        if device_type is None or not autocast_on(device_type):
            return fn(*args, **kwargs)
        with torch.autocast(device_type, enabled=False):
            return fn(*map(_float32, args), **{k: _float32(v) for k, v in kwargs.items()})
    return wrapper  # type: ignore[return-value]
