"""Looks-linear (LL) orthogonal and identity initialisations (balance paper §2 and appendix, Fig. 9).

LL structure (Shang et al. 2016; Balduzzi et al. 2017) mirrors a random orthonormal block ``U``
so that a ReLU network computes a linear map at initialisation::

    W^1 = [U; -U]            (first layer:  U is n_1/2 x n_0)
    W^l = [[U, -U], [-U, U]]  (hidden:      U is n_l/2 x n_{l-1}/2)
    W^L = [U, -U]            (last layer:  U is n_L x n_{L-1}/2)

Choices the paper leaves open (documented in ``docs/inits.md``):

* **Odd widths.** ``U`` gets ``ceil(n/2)`` rows (columns) and the mirrored matrix is cropped to
  the layer's shape: the last neuron of an odd layer keeps its ``U`` row without a mirror.  Nothing
  is padded, so the model's dimensions never change.
* **Orthonormal ``U``.** ``torch.nn.init.orthogonal_``: orthonormal rows when ``U`` is wide,
  orthonormal columns when it is tall.  Squared norms are then: rows of ``W^1`` 1 (``n_1/2 <= n_0``),
  rows and columns of square hidden ``W^l`` 2, columns of ``W^L`` 1 when ``n_L >= n_{L-1}/2`` and
  below 1 for the usual ``n_L << n_{L-1}`` (an orthonormal ``U^L`` cannot have unit columns; the
  authors' code behaves the same).  §2's "``||W^L[:, i]||^2 = 2`` by definition" therefore holds
  only after balancing: Bal_O rescales ``W^1``'s rows and ``W^L``'s columns to ``beta = 2``, the
  value that leaves the square hidden blocks untouched.
* **Heads and unshared weights.** The structure is applied to each stacked
  ``(heads * channels, in_dim)`` matrix; ``W_s``, ``W_t`` and a separate update matrix each get
  their own ``U``.
* **Attention, biases, skips** start at zero (uniform attention), as in the authors' LL inits.
* A one-layer model has neither a first-hidden nor last-hidden structure: plain orthogonal.

Identity variants (appendix): hidden layers get ``I`` (``identity``) or the LL matrix with
``U = I`` (``ll_identity``); the first and last layers get Xavier, as in Fig. 9.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from zoo.inits._registry import register_init
from zoo.inits.xavier import zero_skips_
from zoo.symmetry import feature_matrices, non_matrix_params

BlockFn = Callable[[int, int], Tensor]  # (rows, cols) -> a block U


def orthonormal_block(rows: int, cols: int) -> Tensor:
    """A random ``(rows, cols)`` matrix with orthonormal rows (wide) or columns (tall)."""
    return nn.init.orthogonal_(torch.empty(rows, cols))


def identity_block(rows: int, cols: int) -> Tensor:
    return torch.eye(rows, cols)


def looks_linear(rows: int, cols: int, position: str, block: BlockFn = orthonormal_block) -> Tensor:
    """A ``(rows, cols)`` looks-linear matrix for a layer at ``position`` (``first``, ``hidden``, ``last``).

    Odd sizes: the mirrored matrix of the next even size is cropped (see module docstring).
    """
    half_r, half_c = math.ceil(rows / 2), math.ceil(cols / 2)
    if position == "first":
        u = block(half_r, cols)
        w = torch.cat([u, -u], 0)
    elif position == "last":
        u = block(rows, half_c)
        w = torch.cat([u, -u], 1)
    elif position == "hidden":
        u = block(half_r, half_c)
        w = torch.cat([torch.cat([u, -u], 1), torch.cat([-u, u], 1)], 0)
    else:
        raise ValueError(f"position must be 'first', 'hidden' or 'last', got {position!r}")
    return w[:rows, :cols]


def _position(index: int, num_layers: int) -> Optional[str]:
    if num_layers == 1:
        return None
    return "first" if index == 0 else "last" if index == num_layers - 1 else "hidden"


def zero_non_matrix_params_(model: nn.Module) -> None:
    """Zero attention vectors, biases (GATDB/GATNB's ``xi`` among them) and linear skips."""
    with torch.no_grad():
        for layer in model.layers:
            for p in non_matrix_params(layer):
                p.zero_()
    zero_skips_(model)


def _set_(p: Tensor, value: Tensor) -> None:
    with torch.no_grad():
        p.copy_(value.to(dtype=p.dtype, device=p.device))


def looks_linear_init_(model: nn.Module, block: BlockFn = orthonormal_block, ends: str = "looks_linear") -> None:
    """Feature matrices get the LL structure with blocks from ``block``; ``ends="xavier"`` keeps
    Xavier in the first and last layer (identity variants).  Everything else starts at zero."""
    num_layers = len(model.layers)
    for index, layer in enumerate(model.layers):
        position = _position(index, num_layers)
        for w in feature_matrices(layer):
            rows, cols = w.shape
            if position is None:
                value = orthonormal_block(rows, cols)
            elif ends == "xavier" and position != "hidden":
                value = nn.init.xavier_uniform_(torch.empty(rows, cols))
            else:
                value = looks_linear(rows, cols, position, block)
            _set_(w, value)
    zero_non_matrix_params_(model)


def identity_init_(model: nn.Module) -> None:
    """Hidden feature matrices ``I``, first and last layer Xavier, everything else zero."""
    num_layers = len(model.layers)
    for index, layer in enumerate(model.layers):
        for w in feature_matrices(layer):
            rows, cols = w.shape
            hidden = 0 < index < num_layers - 1
            _set_(w, torch.eye(rows, cols) if hidden else nn.init.xavier_uniform_(torch.empty(rows, cols)))
    zero_non_matrix_params_(model)


@register_init("ll_orthogonal", aliases=("llortho", "ll_ortho", "looks_linear_orthogonal"))
def ll_orthogonal(model: nn.Module) -> None:
    """LLortho: looks-linear orthogonal feature matrices, zero attention.  Unbalanced at the ends:
    ``c = 1 - 2`` in the first hidden layer and ``c = 2 - ||W^L[:, i]||^2 >= 1`` in the last."""
    looks_linear_init_(model, orthonormal_block)


@register_init("identity", aliases=("id",))
def identity(model: nn.Module) -> None:
    """Identity hidden matrices (appendix, Fig. 9), Xavier first/last layer, zero attention."""
    identity_init_(model)


@register_init("ll_identity", aliases=("llidentity", "ll_id"))
def ll_identity(model: nn.Module) -> None:
    """LLidentity: hidden matrices ``[[I, -I], [-I, I]]``, Xavier first/last layer, zero attention."""
    looks_linear_init_(model, identity_block, ends="xavier")
