"""Node splits for transductive tasks: fixed (mask columns) and seeded random ones.

* ``per_class_split``: Shchur et al. (2018): ``train_per_class`` labelled nodes per class for
  training, ``val_per_class`` per class (or ``num_val`` in total) for validation, and the
  rest (or ``num_test`` nodes) for testing.
* ``ratio_split``: a random ``train_ratio``/``val_ratio``/rest partition (e.g. 60/20/20); the
  train and val sizes are ``ratio * n`` rounded to the nearest integer (``rounding="round"``) or
  rounded down (``"floor"``, the remainder to test).

Both are pure functions of ``(y, seed)``: the same seed gives the same split on any machine
(a private ``torch.Generator``; the global RNG is untouched).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from .checks import mask_from_index

Masks = Tuple[Tensor, Tensor, Tensor]


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(int(seed))
    return g


def per_class_split(y: Tensor, seed: int, train_per_class: int = 20, val_per_class: Optional[int] = 30,
                    num_val: Optional[int] = None, num_test: Optional[int] = None,
                    labelled: Optional[Tensor] = None) -> Masks:
    """Masks with ``train_per_class`` train nodes per class (Shchur et al. 2018).

    Validation takes ``val_per_class`` per class, or ``num_val`` nodes drawn from the
    remainder when ``num_val`` is given; test takes the rest, or ``num_test`` nodes of it.
    Classes too small for their share give what they have (train first).
    """
    if num_val is not None and val_per_class is not None:
        val_per_class = None  # an explicit total wins over the per-class default
    g = _generator(seed)
    n = y.size(0)
    candidates = torch.arange(n) if labelled is None else labelled.nonzero().view(-1)
    train, val, rest = [], [], []
    for c in torch.unique(y[candidates]).tolist():
        idx = candidates[y[candidates] == c]
        idx = idx[torch.randperm(idx.numel(), generator=g)]
        train.append(idx[:train_per_class])
        if val_per_class is not None:
            val.append(idx[train_per_class:train_per_class + val_per_class])
            rest.append(idx[train_per_class + val_per_class:])
        else:
            rest.append(idx[train_per_class:])
    remainder = torch.cat(rest)
    remainder = remainder[torch.randperm(remainder.numel(), generator=g)]
    if val_per_class is None:
        k = int(num_val if num_val is not None else 0)
        val, remainder = [remainder[:k]], remainder[k:]
    test = remainder if num_test is None else remainder[:num_test]
    return (mask_from_index(torch.cat(train), n), mask_from_index(torch.cat(val), n),
            mask_from_index(test, n))


#: How ``ratio_split`` turns ``ratio * n`` into a size: ``"round"`` (nearest, the zoo's default) or
#: ``"floor"`` (rounded down; the remainder goes to test).  On Cora (n = 2708) 60/20/20 gives
#: 1625 / 542 / 541 nodes with ``"round"`` and 1624 / 541 / 543 with ``"floor"`` — the nonlocal
#: paper's sizes: all its stored accuracies on five datasets are counts of the floored parts.
RATIO_ROUNDINGS = ("round", "floor")


def ratio_sizes(n: int, train_ratio: float, val_ratio: float, rounding: str = "round") -> Tuple[int, int, int]:
    """``(train, val, test)`` sizes of a ``train_ratio``/``val_ratio``/rest partition of ``n`` nodes."""
    if rounding not in RATIO_ROUNDINGS:
        raise ValueError(f"ratio_rounding must be one of {RATIO_ROUNDINGS}, got {rounding!r}")
    if rounding == "round":
        n_train, n_val = int(round(train_ratio * n)), int(round(val_ratio * n))
    else:
        # 1e-9: a product that is an integer up to float rounding (0.29 * 100 = 28.999...) counts as it
        n_train, n_val = math.floor(train_ratio * n + 1e-9), math.floor(val_ratio * n + 1e-9)
    return n_train, n_val, n - n_train - n_val


def ratio_split(num_nodes: int, seed: int, train_ratio: float = 0.6, val_ratio: float = 0.2,
                labelled: Optional[Tensor] = None, rounding: str = "round") -> Masks:
    """A random ``train_ratio``/``val_ratio``/rest partition of the (labelled) nodes.

    The nodes are permuted once by ``seed``; train, val and test are consecutive slices of that
    order, sized by :func:`ratio_sizes` (``rounding`` moves only the nodes at the slice borders).
    """
    if not (0 < train_ratio and 0 < val_ratio and train_ratio + val_ratio < 1):
        raise ValueError(f"need 0 < train_ratio, 0 < val_ratio and train_ratio + val_ratio < 1; "
                         f"got {train_ratio} and {val_ratio}")
    idx = torch.arange(num_nodes) if labelled is None else labelled.nonzero().view(-1)
    n_train, n_val, _ = ratio_sizes(idx.numel(), train_ratio, val_ratio, rounding)
    idx = idx[torch.randperm(idx.numel(), generator=_generator(seed))]
    return (mask_from_index(idx[:n_train], num_nodes), mask_from_index(idx[n_train:n_train + n_val], num_nodes),
            mask_from_index(idx[n_train + n_val:], num_nodes))


def column(mask: Tensor, i: int) -> Tensor:
    """Column ``i`` of a 2-D ``[num_nodes, num_splits]`` mask (Geom-GCN layout)."""
    if mask.dim() != 2:
        raise ValueError("this dataset has a single fixed split; pass split=None")
    if not 0 <= i < mask.size(1):
        raise ValueError(f"split={i} is out of range: this dataset has splits 0..{mask.size(1) - 1}")
    return mask[:, i].to(torch.bool)  # Planetoid's Geom-GCN masks are uint8
