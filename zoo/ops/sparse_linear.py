"""The first layer's linear map on sparse, constant input features (bag-of-words) as a CSR product
(:func:`zoo.ops.csr.csr_mm`: the compiled CPU kernel, or ``torch.sparse.mm``)."""
from __future__ import annotations

import warnings
from typing import Any, Callable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.ops._constant_cache import ConstantCache
from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import custom_ops_active
from zoo.ops._custom import is_batched as _is_batched
from zoo.ops._direct import Formula, call, direct_op
from zoo.ops.csr import csr_mm
from zoo.ops.precision import float32_under_autocast

#: A constant input with at most this fraction of non-zeros is multiplied as CSR when it has at
#: least SPARSE_MIN_ELEMENTS entries or the weight is stacked (replicas).  Measured fwd+bwd,
#: 64 outputs, 1 thread (CSR / dense): Cora (1.3 % non-zero) 0.18 at 1 replica, 0.19 at 15;
#: Cornell (183 x 1703, 4.9 %) 1.18 at 1, 0.54 at 15; PubMed (10 %) 0.89 at 1, 1.72 at 15.
SPARSE_MIN_ELEMENTS = 2 ** 20
SPARSE_MAX_DENSITY = 0.05


def _csr_parts(x: Tensor) -> Optional[Tuple[Tensor, ...]]:
    """CSR parts of ``x`` and of its transpose, or ``None`` when ``x`` is too dense to gain from CSR."""
    if int(torch.count_nonzero(x)) > SPARSE_MAX_DENSITY * x.numel():
        return None
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        csr = x.to_sparse_csr()
        # x's CSC form is its transpose's CSR form; converting the CSR is O(nnz), where transposing
        # the dense x first copies every entry (125 M for Coauthor CS's 18333 x 6805 features)
        csc = csr.to_sparse_csc()
    return (csr.crow_indices(), csr.col_indices(), csr.values(),
            csc.ccol_indices(), csc.row_indices(), csc.values())


#: CSR copies (and their transposes, for the weight gradient) of constant inputs; ``None`` = keep dense
_SPARSE: ConstantCache[Optional[Tuple[Tensor, ...]]] = ConstantCache(_csr_parts)


def remember_csr(x: Tensor, parts: Callable[[], Tuple[Tensor, ...]], nnz: int) -> None:
    """Record the CSR form of a fresh tensor ``x`` whose structure its maker knows (an input after
    dropout at its non-zeros), so that :func:`linear` does not convert ``x`` every epoch."""
    _SPARSE.put(x, parts() if nnz <= SPARSE_MAX_DENSITY * x.numel() else None)


def _csr_linear_kernel(crow: Tensor, col: Tensor, val: Tensor, crow_t: Tensor, col_t: Tensor, val_t: Tensor,
                       weight: Tensor) -> Tensor:
    return csr_mm(crow, col, val, crow_t.numel() - 1, weight.t())


def _csr_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.save_for_backward(*inputs[3:6])


def _csr_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
    crow_t, col_t, val_t = ctx.saved_tensors
    # d(X W^T)/dW = grad^T X = (X^T grad)^T; the inputs X get no gradient (constants)
    return None, None, None, None, None, None, csr_mm(crow_t, col_t, val_t, grad.size(0), grad).t()


def _csr_linear_rule(op: Callable[..., Tensor]) -> Callable[..., Tuple[Tensor, int]]:
    """The vmap rule of ``zoo::csr_linear`` calling ``op`` on the physical weight: all replicas' weights
    side by side, one ``(N, R*C)`` product."""
    def rule(info: Any, in_dims: Sequence[Any], *args: Any) -> Tuple[Tensor, int]:
        *parts, weight = args
        if any(d is not None for d in in_dims[:6]):
            raise ValueError("csr_linear: the sparse input must be shared by all replicas")
        w = weight.movedim(in_dims[6], 0)  # (R, C, F) -> one (N, R*C) product
        out = op(*parts, w.reshape(-1, w.size(-1)))
        return out.view(out.size(0), w.size(0), w.size(1)), 1
    return rule


#: the rule as :func:`zoo.ops._direct.vmapped` runs it: the kernel and its formula without the op's dispatch
_CSR_LINEAR_DIRECT = _csr_linear_rule(direct_op(Formula(_csr_linear_kernel, _csr_setup, _csr_backward)))


def _csr_linear_direct_vmap(*args: Tensor) -> Tensor:
    """``zoo::csr_linear``'s call under one vmap without its dispatch, else through it."""
    return call(_csr_linear, _CSR_LINEAR_DIRECT, args)


if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::csr_linear")
    def _csr_linear(crow: Tensor, col: Tensor, val: Tensor, crow_t: Tensor, col_t: Tensor, val_t: Tensor,
                    weight: Tensor) -> Tensor:
        return _csr_linear_kernel(crow, col, val, crow_t, col_t, val_t, weight)


    @_csr_linear.register_fake
    def _(crow, col, val, crow_t, col_t, val_t, weight):
        return weight.new_empty((crow.numel() - 1, weight.size(0)))


    _csr_linear.register_autograd(_csr_backward, setup_context=_csr_setup)
    torch.library.register_vmap("zoo::csr_linear", _csr_linear_rule(_csr_linear))
    #: under autocast in float32: the CSR products take no bfloat16 (the dense ``F.linear`` autocasts)
    _csr_linear_float32 = float32_under_autocast(_csr_linear_direct_vmap)


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T``; a large, sparse, constant ``x`` (bag-of-words input features, the same
    tensor every epoch, no gradient) is multiplied as CSR, else the dense ``F.linear``.

    Shapes: x ``(N, F)``, weight ``(C, F)`` -> ``(N, C)``.
    """
    parts = _sparse_parts(x, weight)
    if parts is not None:
        return _csr_linear_float32(*parts, weight)
    return F.linear(x, weight)


def _sparse_parts(x: Tensor, weight: Tensor) -> Optional[Tuple[Tensor, ...]]:
    """The CSR form of ``x`` when :func:`linear` should use it (see SPARSE_MAX_DENSITY), else ``None``."""
    if not (custom_ops_active() and x.dim() == 2 and x.layout == torch.strided and not x.requires_grad
            and not _is_batched(x) and x.is_floating_point()):
        return None
    if x.numel() < SPARSE_MIN_ELEMENTS and not _is_batched(weight):
        return None
    return _SPARSE.get(x)


__all__ = ["linear", "remember_csr", "SPARSE_MIN_ELEMENTS", "SPARSE_MAX_DENSITY"]
