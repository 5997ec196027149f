"""The first layer's linear map on sparse, constant input features (bag-of-words) as a CSR product
(:func:`zoo.ops.csr.csr_mm`: the compiled CPU kernel, or ``torch.sparse.mm``)."""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.ops._constant_cache import ConstantCache
from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import custom_ops_active
from zoo.ops._custom import is_batched as _is_batched
from zoo.ops._custom import under_vmap
from zoo.ops._direct import Formula, call, direct_op
from zoo.ops import gemm_order
from zoo.ops.csr import compiled_csr_mm, csr_mm
from zoo.ops.precision import float32_under_autocast

_get_unwrapped = getattr(getattr(torch._C, "_functorch", None), "get_unwrapped", None)

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


def remember_csr(x: Tensor, parts: Callable[[], Tuple[Tensor, ...]], nnz: int,
                 write: Optional[Callable[[Tensor], Tensor]] = None) -> None:
    """Record the CSR form of a fresh tensor ``x`` whose structure its maker knows (an input after
    dropout at its non-zeros), so that :func:`linear` does not convert ``x`` every epoch.  ``write``:
    ``x`` is not written yet; ``write(x)`` writes it (in place), and :func:`linear` calls it before any
    use of ``x``'s numbers (it holds no reference to ``x``: the entry goes with ``x``)."""
    _SPARSE.put(x, parts() if nnz <= SPARSE_MAX_DENSITY * x.numel() else None)
    if write is not None:
        _UNWRITTEN.put(x, write)


#: CSR forms of stacked inputs, one slice per replica: the structure and ``(R, nnz)`` values
_STACKED: ConstantCache[Optional[Tuple[Tensor, ...]]] = ConstantCache(lambda stack: None)
#: stacks left unwritten (:meth:`zoo.ops.sparse_input.SparseInput.stacked`): what writes each
_UNWRITTEN: ConstantCache[Optional[Callable[[Tensor], Tensor]]] = ConstantCache(lambda stack: None)


def remember_stacked_csr(x: Tensor, parts: Callable[[], Tuple[Tensor, ...]], nnz: int,
                         write: Optional[Callable[[Tensor], Tensor]] = None) -> None:
    """:func:`remember_csr` for a stack ``x`` ``(R, N, F)`` of matrices of one structure (the replicas'
    own dropped copies of one input): ``parts`` gives ``(crow, col, values, crow_t, col_t, values_t)``
    with ``(R, nnz)`` values.  ``write``: ``x`` is not written yet; ``write(x)`` writes it (in place), and
    :func:`linear` calls it before any use of ``x``'s numbers (it holds no reference to ``x``: the
    entry goes with ``x``)."""
    _STACKED.put(x, parts() if nnz <= SPARSE_MAX_DENSITY * x[0].numel() else None)
    if write is not None:
        _UNWRITTEN.put(x, write)


def _write_if_unwritten(x: Tensor) -> None:
    """Write ``x`` (or the stack under it) where its maker left it unwritten
    (:meth:`~zoo.ops.sparse_input.SparseInput.dropped`, :meth:`~zoo.ops.sparse_input.SparseInput.stacked`)."""
    if under_vmap(x):
        if _get_unwrapped is None:
            return
        x = _get_unwrapped(x)
    write = _UNWRITTEN.find(x)
    if write is not None:
        write(x)


def _csr_linear_kernel(crow: Tensor, col: Tensor, val: Tensor, crow_t: Tensor, col_t: Tensor, val_t: Tensor,
                       weight: Tensor) -> Tensor:
    return csr_mm(crow, col, val, crow_t.numel() - 1, weight.t())


def _csr_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.save_for_backward(*inputs[3:6])


def _csr_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
    crow_t, col_t, val_t = ctx.saved_tensors
    # d(X W^T)/dW = grad^T X = (X^T grad)^T; the inputs X get no gradient (constants)
    deferring = _DEFERRING.get()
    if deferring is not None and deferring.takes(grad):
        weight_grad = deferring.defer(crow_t, col_t, val_t, grad)
    else:
        weight_grad = csr_mm(crow_t, col_t, val_t, grad.size(0), grad)
    return None, None, None, None, None, None, weight_grad.t()


class DeferredGrad:
    """A weight gradient ``(X^T G)^T`` whose numbers are not computed yet: ``out`` ``(F, M)`` is its
    storage (uninitialised until :meth:`compute`), the gradient autograd handed back is ``out.t()``
    (or a view of it), and :meth:`sgd_step` folds the product into a plain SGD step instead."""

    def __init__(self, parts: Tuple[Tensor, Tensor, Tensor], grad: Tensor, out: Tensor) -> None:
        self.parts, self.grad, self.out = parts, grad, out

    def compute(self) -> None:
        """Write the gradient's numbers into ``out`` (those of the product it stands for)."""
        self.out.copy_(csr_mm(*self.parts, self.grad.size(0), self.grad))

    def holds(self, grad: Tensor) -> bool:
        """Whether ``grad`` is this gradient: a view of ``out`` over all of it (autograd handed it
        back untouched: the weight had no other use, else its gradients were summed into a new tensor)."""
        return grad.data_ptr() == self.out.data_ptr() and grad.numel() == self.out.numel()

    def sgd_step(self, param: Tensor, rate: Tensor) -> bool:
        """``param -= rate * grad`` in place with this gradient, where ``param`` is stored as ``out``
        (``param``'s memory is ``out``'s layout) and ``rate`` holds one learning rate per replica:
        ``out``'s columns are the replicas' ``M / R`` each.  The numbers are those of ``compute`` then
        ``param.addcmul_(rate column, grad, value=-1)`` (checked once per dtype and width against
        torch's kernel, :func:`_fused_step_agrees`); returns False, doing nothing, where it cannot."""
        if not (param.dtype == self.out.dtype and rate.dtype == param.dtype and rate.dim() == 1 and param.dim() >= 2
                and param.size(0) == rate.numel() and _same_memory_order(param, self.out)):
            return False
        width = self.out.size(1) // rate.numel()
        if not _fused_step_agrees(param.dtype, width):
            return False
        crow_t, col_t, val_t = self.parts
        torch.ops.zoo_kernels.csr_mm_sgd_(crow_t, col_t, val_t, self.grad, param.movedim(-1, 0).view(self.out.shape),
                                          rate, width)
        return True


class _Deferring:
    """The weight gradients deferred while :func:`deferred_weight_grads` is active (``compute``: their
    numbers computed at once all the same)."""

    def __init__(self, compute: bool) -> None:
        self.grads: List[DeferredGrad] = []
        self.compute = compute

    @staticmethod
    def takes(grad: Tensor) -> bool:
        return grad.dim() == 2 and compiled_csr_mm(grad.device, grad.dtype) is not None and hasattr(
            torch.ops.zoo_kernels, "csr_mm_sgd_")

    def defer(self, crow_t: Tensor, col_t: Tensor, val_t: Tensor, grad: Tensor) -> Tensor:
        if self.compute:
            out = csr_mm(crow_t, col_t, val_t, grad.size(0), grad)
        else:
            out = grad.new_empty((crow_t.numel() - 1, grad.size(1)))
        self.grads.append(DeferredGrad((crow_t, col_t, val_t), grad, out))
        return out


#: the active :func:`deferred_weight_grads` scope of this thread / context (the CPU backward runs in the caller's)
_DEFERRING: ContextVar[Optional[_Deferring]] = ContextVar("zoo_deferred_weight_grads", default=None)


@contextmanager
def deferred_weight_grads(compute: bool = False) -> Iterator[List[DeferredGrad]]:
    """Within: the CSR linear map's weight gradients are not computed by the backward; each is
    handed back as uninitialised storage and listed (one :class:`DeferredGrad` per backward) in the
    list this yields, for the caller to :meth:`~DeferredGrad.compute` or fold into its step.  Only for
    a caller that does exactly that with every gradient of its own ``torch.autograd.grad`` call, and
    knows that each deferred gradient reaches it untouched (:meth:`DeferredGrad.holds`; a weight with
    another use gets the sum of both, read from the uninitialised storage).  ``compute``: list them,
    their numbers computed as usual (to learn which gradients reach the caller untouched)."""
    deferring = _Deferring(compute)
    token = _DEFERRING.set(deferring)
    try:
        yield deferring.grads
    finally:
        _DEFERRING.reset(token)


def _same_memory_order(param: Tensor, out: Tensor) -> bool:
    """Whether ``param`` ``(R, ..., F)`` is stored as ``out`` ``(F, M)``: its last dim outermost, the rest
    row-major (so ``out``'s columns are the replicas' in turn)."""
    return param.numel() == out.numel() and param.size(-1) == out.size(0) and param.movedim(-1, 0).is_contiguous()


#: (dtype, width) -> whether csr_mm_sgd_ gives torch's csr_mm + addcmul_ numbers here
_AGREES: Dict[Tuple[torch.dtype, int], bool] = {}


def _fused_step_agrees(dtype: torch.dtype, width: int) -> bool:
    """Whether the fused kernel's step rounds as torch's ``addcmul_`` does on this machine (one fused
    multiply-add, or not), tried once on random numbers of this dtype and replica width."""
    key = (dtype, width)
    if key not in _AGREES:
        gen = torch.Generator().manual_seed(0)
        x_t = (torch.rand(7, 5, generator=gen) < 0.5).to(dtype) * torch.rand(7, 5, generator=gen, dtype=dtype)
        with warnings.catch_warnings():  # "sparse CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            csr = x_t.to_sparse_csr()
        crow_t, col_t, val_t = csr.crow_indices(), csr.col_indices(), csr.values()
        grad = torch.randn(5, 2 * width, generator=gen, dtype=dtype)
        param = torch.randn(7, 2 * width, generator=gen, dtype=dtype)
        rate = torch.tensor([0.05, 0.3], dtype=torch.float64).to(dtype)
        want = param.clone()
        want.view(7, 2, width).addcmul_(rate.view(1, 2, 1), csr_mm(crow_t, col_t, val_t, 5, grad).view(7, 2, width),
                                        value=-1)
        torch.ops.zoo_kernels.csr_mm_sgd_(crow_t, col_t, val_t, grad, param, rate, width)
        _AGREES[key] = torch.equal(param, want)
    return _AGREES[key]


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


def _replicas_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    ctx.save_for_backward(*inputs[3:6])


def _replicas_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
    crow_t, col_t, val_t = ctx.saved_tensors
    # d(X_r W_r^T)/dW_r = (X_r^T G_r)^T: the transposed view of an (R, F, C) product, the dense batched
    # product's layout too
    weight_grad = gemm_order.csr_mm(crow_t, col_t, val_t, grad.contiguous()).transpose(1, 2)
    return None, None, None, None, None, None, weight_grad


if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::csr_linear_replicas")
    def _csr_linear_replicas(crow: Tensor, col: Tensor, val: Tensor, crow_t: Tensor, col_t: Tensor, val_t: Tensor,
                             weight: Tensor) -> Tensor:
        return gemm_order.csr_mm(crow, col, val, weight.transpose(1, 2).contiguous())


    @_csr_linear_replicas.register_fake
    def _(crow, col, val, crow_t, col_t, val_t, weight):
        return weight.new_empty((weight.size(0), crow.numel() - 1, weight.size(1)))


    _csr_linear_replicas.register_autograd(_replicas_backward, setup_context=_replicas_setup)


    @_custom_op("zoo::stacked_sparse_linear")
    def _stacked_sparse_linear(x: Tensor, weight: Tensor) -> Tensor:
        return F.linear(x, weight)


    @_stacked_sparse_linear.register_fake
    def _(x, weight):
        return x.new_empty((*x.shape[:-1], weight.size(0)))


    def _stacked_sparse_linear_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, weight: Tensor) -> Tuple[Tensor, int]:
        parts = _STACKED.find(x) if in_dims[0] == 0 else None
        if parts is None or in_dims[1] is None:
            raise ValueError("stacked_sparse_linear: a remembered stack of sparse inputs and stacked weights only")
        return _csr_linear_replicas(*parts, weight.movedim(in_dims[1], 0)), 0


    torch.library.register_vmap("zoo::stacked_sparse_linear", _stacked_sparse_linear_vmap)


#: A constant input with at most this fraction of non-zeros, multiplied by stacked weights (replicas),
#: is multiplied as CSR in the dense product's order (:func:`zoo.ops.gemm_order.each_mm`), and a dropped
#: copy of it that only this module reads is kept as CSR (:func:`each_parts`).  Below this density the
#: CSR product does fewer multiply-adds than the dense one by more than its slower inner loop costs
#: (figures: docs/notes/performance.md, Amazon Computers' 35 % bag of words).
EACH_MAX_DENSITY = 0.5


def _each_parts(x: Tensor) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
    """``x``'s CSR parts ``(crow, col, values)`` where :data:`EACH_MAX_DENSITY` holds and every entry is
    finite (a zero entry's dense multiply-add changes no sum only where the other factor is finite), else ``None``."""
    if int(torch.count_nonzero(x)) > EACH_MAX_DENSITY * x.numel() or not bool(torch.isfinite(x).all()):
        return None
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter("ignore", UserWarning)
        csr = x.to_sparse_csr()
    return csr.crow_indices().contiguous(), csr.col_indices().contiguous(), csr.values().contiguous()


_EACH_INPUTS: ConstantCache[Optional[Tuple[Tensor, Tensor, Tensor]]] = ConstantCache(_each_parts)


def each_parts(x: Tensor) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
    """The CSR parts of a constant (no gradient, not replica-batched) 2-D CPU input of at least
    SPARSE_MIN_ELEMENTS entries that :func:`linear` multiplies by stacked weights as CSR, or ``None``."""
    if (x.dim() != 2 or x.layout != torch.strided or x.requires_grad or under_vmap(x) or x.device.type != "cpu"
            or x.dtype not in (torch.float32, torch.float64) or x.numel() < SPARSE_MIN_ELEMENTS):
        return None
    return _EACH_INPUTS.get(x)


#: stacks ``(R, N, F)`` of the replicas' own matrices kept as CSR: one ``(crow, col, values)`` per replica
_EACH_STACKS: ConstantCache[Optional[List[gemm_order.Csr]]] = ConstantCache(lambda stack: None)


def remember_each_stack(x: Tensor, parts: List[gemm_order.Csr], write: Callable[[Tensor], Tensor]) -> None:
    """Record the stack ``x`` ``(R, N, F)`` as the CSR matrices ``parts`` (one per replica), ``x`` left
    unwritten: ``write(x)`` writes it (in place), and :func:`linear` calls it before any use of ``x``'s
    numbers (it holds no reference to ``x``: the entry goes with ``x``)."""
    _EACH_STACKS.put(x, list(parts))
    _UNWRITTEN.put(x, write)


def _each_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
    crows, cols, values, weight = inputs
    ctx.parts, ctx.k = list(zip(crows, cols, values)), weight.size(-1)


def _each_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
    # d(X_r W_r^T)/dW_r = (X_r^T G_r)^T: the transposed view of an (R, F, C) product, as the dense batched
    # product's weight gradient (G read in place, (N, R, C)); the inputs X_r get no gradient (constants)
    none = [None] * len(ctx.parts)
    return none, none, none, gemm_order.each_t_mm(ctx.parts, grad.transpose(0, 1), ctx.k).transpose(1, 2)


if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::csr_linear_each")
    def _csr_linear_each(crows: List[Tensor], cols: List[Tensor], values: List[Tensor], weight: Tensor) -> Tensor:
        """``(N, R, C)``: ``[:, r]`` is ``X_r @ weight[r]^T`` (weight ``(R, C, F)``)."""
        return gemm_order.each_mm(list(zip(crows, cols, values)), weight.transpose(1, 2).contiguous())


    @_csr_linear_each.register_fake
    def _(crows, cols, values, weight):
        return weight.new_empty((crows[0].numel() - 1, weight.size(0), weight.size(1)))


    _csr_linear_each.register_autograd(_each_backward, setup_context=_each_setup)


    @_custom_op("zoo::each_sparse_linear")
    def _each_sparse_linear(x: Tensor, weight: Tensor) -> Tensor:
        return F.linear(x, weight)


    @_each_sparse_linear.register_fake
    def _(x, weight):
        return x.new_empty((*x.shape[:-1], weight.size(0)))


    def _each_sparse_linear_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, weight: Tensor) -> Tuple[Tensor, int]:
        x_dim, weight_dim = in_dims
        parts = _EACH_STACKS.find(x) if x_dim == 0 else ([each_parts(x)] * info.batch_size if x_dim is None else None)
        if parts is None or None in parts or weight_dim is None:
            raise ValueError("each_sparse_linear: a remembered stack or a shared sparse input, and stacked weights only")
        crows, cols, values = (list(t) for t in zip(*parts))
        # the replicas' rows side by side (N, R, C): the attention ops fold the replicas into the heads
        # without a copy (the dense batched product's (R, N, C) needs one)
        return _csr_linear_each(crows, cols, values, weight.movedim(weight_dim, 0)), 1


    torch.library.register_vmap("zoo::each_sparse_linear", _each_sparse_linear_vmap)


def _each_sparse(x: Tensor, weight: Tensor) -> bool:
    """Whether :func:`linear` multiplies ``x`` as CSR matrices, one per replica, in the dense product's order:
    stacked weights, ``x`` a remembered stack (:func:`remember_each_stack`) or a constant input
    :func:`each_parts` takes, no autocast, and the kernels giving the dense batched product's bits here
    (:func:`zoo.ops.gemm_order.each_serves`)."""
    if not (_HAS_CUSTOM_OPS and _is_batched(weight) and x.dim() == 2 and _get_unwrapped is not None):
        return False
    if _is_batched(x):
        stack = _get_unwrapped(x)
        if stack.dim() != 3 or _EACH_STACKS.find(stack) is None:
            return False
    elif not custom_ops_active() or each_parts(x) is None:
        return False
    if torch.is_autocast_enabled(x.device.type):
        return False
    return gemm_order.each_serves(x.size(0), x.size(1), weight.size(0), x.dtype, x.device)


def _stacked_sparse(x: Tensor, weight: Tensor) -> bool:
    """Whether :func:`linear` multiplies ``x``, the replicas' own dropped copies of a sparse input
    (:meth:`zoo.ops.sparse_input.SparseInput.stacked`), slice by slice without their zeros: stacked
    weights, no autocast, and the kernel giving the dense batched product's bits here
    (:func:`zoo.ops.gemm_order.serves`)."""
    if not (_is_batched(x) and _is_batched(weight) and x.dim() == 2 and _get_unwrapped is not None):
        return False
    stack = _get_unwrapped(x)
    if stack.dim() != 3 or _STACKED.find(stack) is None or torch.is_autocast_enabled(x.device.type):
        return False
    return gemm_order.serves(x.size(0), x.size(1), weight.size(0), x.dtype, x.device)


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T``; a large, sparse, constant ``x`` (bag-of-words input features, the same
    tensor every epoch, no gradient) is multiplied as CSR, else the dense ``F.linear``.

    Shapes: x ``(N, F)``, weight ``(C, F)`` -> ``(N, C)``.
    """
    parts = _sparse_parts(x, weight)
    if parts is not None:
        return _csr_linear_float32(*parts, weight)
    if _stacked_sparse(x, weight):
        return _stacked_sparse_linear(x, weight)
    if _each_sparse(x, weight):
        return _each_sparse_linear(x, weight)
    _write_if_unwritten(x)
    return F.linear(x, weight)


def _sparse_parts(x: Tensor, weight: Tensor) -> Optional[Tuple[Tensor, ...]]:
    """The CSR form of ``x`` when :func:`linear` should use it (see SPARSE_MAX_DENSITY), else ``None``."""
    if not (custom_ops_active() and x.dim() == 2 and x.layout == torch.strided and not x.requires_grad
            and not _is_batched(x) and x.is_floating_point()):
        return None
    if x.numel() < SPARSE_MIN_ELEMENTS and not _is_batched(weight):
        return None
    return _SPARSE.get(x)


__all__ = ["linear", "remember_csr", "remember_stacked_csr", "remember_each_stack", "each_parts", "EACH_MAX_DENSITY", "SPARSE_MIN_ELEMENTS", "SPARSE_MAX_DENSITY", "DeferredGrad", "deferred_weight_grads"]
