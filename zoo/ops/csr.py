"""CSR times dense: the compiled CPU kernel where it serves, else ``torch.sparse.mm``.

``zoo_kernels.csr_mm`` (``_compiled/cpu/sparse.cpp``) sums every output element over its row's
entries in their order, each product rounded before it is added: the float order of the MKL
product behind ``torch.sparse.mm`` on x86 builds, so the two give the same bits
(tests/ops/compiled/test_sparse_mm.py).  It saves that path's per-call work (a sparse handle, index
conversions, zero-filling the output) and keeps a block of the dense operand in cache across rows.
"""
from __future__ import annotations

import warnings
from typing import Callable, Optional

import torch
from torch import Tensor

from zoo.ops._compiled.build import load_cpu_kernels


def csr_tensor(crow: Tensor, col: Tensor, val: Tensor, cols: int) -> Tensor:
    """The ``(crow.numel() - 1, cols)`` sparse CSR tensor of these parts (no invariant checks)."""
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, (crow.numel() - 1, cols), check_invariants=False)


def compiled_csr_mm(device: torch.device, dtype: torch.dtype) -> Optional[Callable[..., Tensor]]:
    """The compiled CSR product for dense operands on ``device`` of ``dtype``, or ``None`` (not the
    CPU, not float32 / float64, the compiled kernels off or unavailable)."""
    if device.type != "cpu" or dtype not in (torch.float32, torch.float64) or not load_cpu_kernels():
        return None
    return getattr(torch.ops.zoo_kernels, "csr_mm", None)


def csr_mm(crow: Tensor, col: Tensor, val: Tensor, cols: int, dense: Tensor, gate: Optional[Tensor] = None,
           relu: bool = False) -> Tensor:
    """``A @ dense`` for ``A`` given by its CSR parts, ``(crow.numel() - 1, cols)``.

    ``gate`` (``dense``'s shape): multiply ``dense`` where ``gate > 0`` and 0 elsewhere (a ReLU's
    backward, ``threshold_backward(dense, gate, 0)``, before the product); ``relu``: the product's
    ReLU.  The compiled kernel applies both inside the product (no pass over a separate tensor);
    the numbers are those of the separate ops.

    Shapes: dense ``(cols, M)`` -> ``(rows, M)``, or a stack ``(R, cols, M)`` -> ``(R, rows, M)``
    (each slice multiplied alone: its numbers do not depend on ``R``)."""
    kernel = compiled_csr_mm(dense.device, dense.dtype)
    if kernel is not None:
        return kernel(crow, col, val, dense, gate, relu)
    if gate is not None:
        dense = torch.ops.aten.threshold_backward(dense, gate, 0)
    a = csr_tensor(crow, col, val, cols)
    if dense.dim() == 2:
        out = torch.sparse.mm(a, dense.contiguous())
    else:
        out = dense.new_empty((dense.shape[0], crow.numel() - 1, dense.shape[-1]))
        for i in range(dense.shape[0]):
            torch.mm(a, dense[i].contiguous(), out=out[i])
    return out.relu_() if relu else out


__all__ = ["csr_mm", "csr_tensor", "compiled_csr_mm"]
