"""Input validation shared by the models: option checks (:func:`positive_int`, :func:`real_number`)
and the node-feature check (:func:`check_node_features`, with its once-per-tensor NaN/inf scan).

Each check raises one clear line naming the problem and the fix.
"""
from __future__ import annotations

import math
import os
import weakref
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor, nn

from zoo.nn.encoders import check_edge_features

#: Set ``ZOO_CHECK_INPUTS=0`` to skip the NaN/inf scan of node features in every model.
CHECK_INPUTS_ENV = "ZOO_CHECK_INPUTS"


def positive_int(name: str, value: Any, *, allow_none: bool = False) -> Optional[int]:
    """``value`` if it is an ``int`` >= 1 (bools are not ints), else a ``ValueError`` naming ``name``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def real_number(name: str, value: Any, low: float = -math.inf, high: float = math.inf,
                high_open: bool = False) -> float:
    """``value`` if it is a finite real (not a bool) in ``[low, high]`` (``[low, high)`` if ``high_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not (low <= value and (value < high if high_open else value <= high)):
        raise ValueError(f"{name} must be in [{low}, {high}{')' if high_open else ']'}, got {value!r}")
    return value


class _SeenInputs:
    """Feature tensors already scanned for NaN/inf, keyed by ``id`` and checked against the
    tensor's version counter (an in-place change re-triggers the scan); like zoo.graph's cache."""

    def __init__(self) -> None:
        self._seen: Dict[int, Tuple[Any, int]] = {}

    def hit(self, x: Tensor, version: Optional[int]) -> bool:
        entry = self._seen.get(id(x))
        return entry is not None and version is not None and entry[0]() is x and entry[1] == version

    def add(self, x: Tensor, version: Optional[int]) -> None:
        if version is None:
            return
        key = id(x)
        if key not in self._seen:
            weakref.finalize(x, self._seen.pop, key, None)
        self._seen[key] = (weakref.ref(x), version)


_SEEN = _SeenInputs()


def _version(x: Tensor) -> Optional[int]:
    try:
        return x._version
    except RuntimeError:  # inference tensors have no version counter: scan every time
        return None


# torch.compiler.is_compiling is torch >= 2.3; torch 2.2 (the DGL environment) has dynamo's own.
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling


def _autocast_enabled(device_type: str) -> bool:
    """``torch.is_autocast_enabled(device_type)``; torch < 2.4 takes no argument (CUDA) and has a CPU twin."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def _scan_skipped(x: Tensor) -> bool:
    functorch = getattr(torch._C, "_functorch", None)
    if functorch is not None and functorch.is_batchedtensor(x):  # values are per-replica: not readable here
        return True
    return x.device.type == "meta" or _is_compiling()


def check_node_features(model: nn.Module, x: Any, in_dim: int) -> None:
    """Check a model's node features: a floating ``(N, in_dim)`` tensor of the parameters' dtype,
    and (unless switched off) free of NaN/inf.

    The value scan runs once per feature tensor (cached by identity and version counter, so a
    training loop that passes the same ``x`` every epoch pays for it once).  Switch it off per
    model with ``zoo.build(..., check_inputs=False)`` / ``model.check_inputs = False``, or for
    every model with the environment variable ``ZOO_CHECK_INPUTS=0``.
    """
    owner = type(model).__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{owner}: node features x must be a torch.Tensor of shape (N, {in_dim}), "
                        f"got {type(x).__name__}")
    if x.dim() != 2 or x.size(1) != in_dim:
        got = f"{x.size(1)}" if x.dim() == 2 else f"a tensor of shape {tuple(x.shape)}"
        raise ValueError(f"{owner}: expected node features of shape (N, in_dim) with in_dim={in_dim} features, "
                         f"got {got}; build the model with in_dim=x.size(1) or pass the matching features")
    # A model with an input encoder (e.g. OGB's AtomEncoder) reads raw columns of any dtype.
    if getattr(model, "input_encoder", None) is None:
        if not x.is_floating_point():
            raise TypeError(f"{owner}: node features must be floating point, got dtype {x.dtype}; "
                            "convert them with x.float() (integer category ids need an input encoder)")
        param = next(iter(model.parameters()), None)
        if (param is not None and param.is_floating_point() and x.dtype != param.dtype
                and not _autocast_enabled(x.device.type)):
            raise TypeError(f"{owner}: node features have dtype {x.dtype} but the model's parameters are "
                            f"{param.dtype}; convert one of them (x.to({param.dtype}) or model.to({x.dtype}))")
    if (not x.is_floating_point() or not getattr(model, "check_inputs", True)
            or os.environ.get(CHECK_INPUTS_ENV, "1") == "0" or _scan_skipped(x)):
        return
    version = _version(x)
    if _SEEN.hit(x, version):
        return
    # One reduction: a NaN/inf anywhere makes the sum non-finite (a finite overflow only sends us
    # to the exact elementwise test below).
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        bad = (~torch.isfinite(x)).nonzero()
        row, col = (int(v) for v in bad[0])
        raise ValueError(
            f"{owner}: node features contain {bad.size(0)} NaN/inf value(s) (first at row {row}, column {col}: "
            f"{x[row, col].item()}); clean the data (e.g. torch.nan_to_num) or skip this check with "
            f"zoo.build(..., check_inputs=False) / {CHECK_INPUTS_ENV}=0"
        )
    _SEEN.add(x, version)


__all__ = ["CHECK_INPUTS_ENV", "check_node_features", "check_edge_inputs", "positive_int", "real_number"]


def check_edge_inputs(model: nn.Module, edge_attr: Any, encoder: nn.Module, num_edges: int) -> None:
    """Check a model's raw edge features (:func:`zoo.nn.encoders.check_edge_features`): shape,
    rows, dtype and — like the node features: once per tensor, with the same opt-outs — NaN/inf."""
    scan = (isinstance(edge_attr, Tensor) and getattr(model, "check_inputs", True)
            and os.environ.get(CHECK_INPUTS_ENV, "1") != "0" and not _scan_skipped(edge_attr)
            and not _SEEN.hit(edge_attr, _version(edge_attr)))
    owner = getattr(model, "family", None) or type(model).__name__
    check_edge_features(owner, edge_attr, encoder, num_edges, scan_values=scan)
    if scan:
        _SEEN.add(edge_attr, _version(edge_attr))
