"""The stored non-zeros of a constant, mostly-zero input (bag-of-words features), for dropout that
draws one number per non-zero instead of one per entry, and for the CSR form of what it returns."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from zoo.ops.sparse_linear import SPARSE_MAX_DENSITY, remember_csr, remember_stacked_csr


class SparseInput:
    """``x``'s non-zeros: flat positions (row-major, so also CSR order) and values.

    Shapes: x ``(N, F)`` (any shape for :meth:`dropped`; the CSR form is for matrices);
    positions, values ``(nnz,)``.
    """

    def __init__(self, x: Tensor) -> None:
        self.shape, self.dtype, self.device = x.shape, x.dtype, x.device
        self.positions = x.reshape(-1).nonzero().view(-1)
        self.values = x.reshape(-1).index_select(0, self.positions)
        self._structure: Optional[Tuple[Tensor, ...]] = None

    @property
    def nnz(self) -> int:
        return self.positions.numel()

    def dropped(self, keep: Tensor, p: float, remember: bool = True, dense: bool = True) -> Tensor:
        """``x`` with its non-zeros times ``keep / (1 - p)`` (``keep``: one 0/1 draw per non-zero).

        ``remember``: hand the result's CSR form (``x``'s structure, these values) to
        :func:`zoo.ops.sparse_linear.linear`, which then multiplies it without converting it.
        ``dense=False`` (with ``remember``, for a result that goes to ``linear`` alone): where ``linear``
        multiplies the CSR form, the result is left unwritten, and ``linear`` writes it only where it
        needs the dense form (Coauthor CS: 125 M entries zeroed every epoch for 1.1 M stored ones).
        """
        values = keep.mul_(self.values).div_(1.0 - p)
        unwritten = not dense and remember and len(self.shape) == 2 and \
            self.nnz <= SPARSE_MAX_DENSITY * self.shape.numel()
        out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        if not unwritten:
            self._write_one(out, values)
        if remember and len(self.shape) == 2:
            remember_csr(out, lambda: self.csr_parts(values), self.nnz,
                         (lambda x: self._write_one(x, values)) if unwritten else None)
        return out

    def _write_one(self, out: Tensor, values: Tensor) -> Tensor:
        """``out`` (``x``'s shape, contiguous) zeroed, then ``values`` at the non-zeros."""
        out.view(-1).zero_().index_copy_(0, self.positions, values)
        return out

    def stacked(self, values: Tensor, remember: bool = True, dense: bool = True) -> Tensor:
        """The ``(R, *x.shape)`` stack of ``x`` with the non-zeros of slice ``r`` replaced by ``values[r]``
        (``values`` ``(R, nnz)``), written into one zeroed tensor.

        ``remember``: hand the stack's CSR forms (``x``'s structure, these values) to
        :func:`zoo.ops.sparse_linear.linear`, which then multiplies the replicas' slices without their zeros.
        ``dense=False`` (with ``remember``, for a stack that goes to ``linear`` alone): the stack is left
        unwritten, and ``linear`` writes it only where it needs the dense form.
        """
        shape = (values.size(0), *self.shape)
        sparse = remember and len(self.shape) == 2 and self.nnz <= SPARSE_MAX_DENSITY * self.shape.numel()
        if dense or not sparse:
            out = self._write(torch.empty(shape, dtype=self.dtype, device=self.device), values)
        else:
            out = torch.empty(shape, dtype=self.dtype, device=self.device)
        if sparse:
            remember_stacked_csr(out, lambda: self.csr_parts(values), self.nnz,
                                 None if dense else lambda stack: self._write(stack, values))
        return out

    def _write(self, out: Tensor, values: Tensor) -> Tensor:
        """``out`` (``(R, *x.shape)``, contiguous) zeroed, then ``values[r]`` at slice ``r``'s non-zeros."""
        flat = out.view(out.size(0), -1).zero_()
        flat.index_copy_(1, self.positions, values)
        return out

    def csr_parts(self, values: Tensor) -> Tuple[Tensor, ...]:
        """CSR parts of the matrix with ``values`` at the non-zeros, and of its transpose:
        ``(crow, col, values, crow_t, col_t, values_t)`` as :mod:`zoo.ops.sparse_linear` keeps them
        (``values`` ``(nnz,)``, or ``(R, nnz)`` for a stack of matrices of one structure)."""
        if self._structure is None:
            rows_n, cols_n = self.shape
            rows, cols = self.positions // cols_n, self.positions % cols_n
            crow = torch.zeros(rows_n + 1, dtype=torch.long, device=self.device)
            crow[1:] = torch.bincount(rows, minlength=rows_n).cumsum(0)
            # the transpose's order: by column, then row (keys unique, so the sort is a permutation)
            order_t = torch.argsort(cols * rows_n + rows)
            crow_t = torch.zeros(cols_n + 1, dtype=torch.long, device=self.device)
            crow_t[1:] = torch.bincount(cols, minlength=cols_n).cumsum(0)
            self._structure = (crow, cols, crow_t, rows.index_select(0, order_t), order_t)
        crow, col, crow_t, col_t, order_t = self._structure
        return crow, col, values, crow_t, col_t, values.index_select(-1, order_t)


__all__ = ["SparseInput"]
