"""Node splits for transductive tasks: fixed (mask columns) and seeded random ones.

* ``per_class_split``: Shchur et al. (2018): ``train_per_class`` labelled nodes per class for
  training, ``val_per_class`` per class (or ``num_val`` in total) for validation, and the
  rest (or ``num_test`` nodes) for testing.
* ``ratio_split``: a random ``train_ratio``/``val_ratio``/rest partition (e.g. 60/20/20).

Both are pure functions of ``(y, seed)``: the same seed gives the same split on any machine
(a private ``torch.Generator``; the global RNG is untouched).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from .task import mask_from_index

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


def ratio_split(num_nodes: int, seed: int, train_ratio: float = 0.6, val_ratio: float = 0.2,
                labelled: Optional[Tensor] = None) -> Masks:
    """A random ``train_ratio``/``val_ratio``/rest partition of the (labelled) nodes."""
    if not (0 < train_ratio and 0 < val_ratio and train_ratio + val_ratio < 1):
        raise ValueError(f"need 0 < train_ratio, 0 < val_ratio and train_ratio + val_ratio < 1; "
                         f"got {train_ratio} and {val_ratio}")
    idx = torch.arange(num_nodes) if labelled is None else labelled.nonzero().view(-1)
    idx = idx[torch.randperm(idx.numel(), generator=_generator(seed))]
    n_train = int(round(train_ratio * idx.numel()))
    n_val = int(round(val_ratio * idx.numel()))
    return (mask_from_index(idx[:n_train], num_nodes), mask_from_index(idx[n_train:n_train + n_val], num_nodes),
            mask_from_index(idx[n_train + n_val:], num_nodes))


def column(mask: Tensor, i: int) -> Tensor:
    """Column ``i`` of a 2-D ``[num_nodes, num_splits]`` mask (Geom-GCN layout)."""
    if mask.dim() != 2:
        raise ValueError("this dataset has a single fixed split; pass split=None")
    if not 0 <= i < mask.size(1):
        raise ValueError(f"split={i} is out of range: this dataset has splits 0..{mask.size(1) - 1}")
    return mask[:, i].to(torch.bool)  # Planetoid's Geom-GCN masks are uint8
