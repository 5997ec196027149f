r"""Rank diagnostics of layer representations (Zhang, Deidda, Higham & Tudisco, *Are We Measuring
Oversmoothing in Graph Neural Networks Correctly?*, arXiv 2502.04591): the Dirichlet energy can
stay put while the features collapse onto a few directions, and the rank of ``X^l`` tracks the
accuracy drop.  With the singular values :math:`\sigma_1 \ge \dots \ge \sigma_k` of ``X`` ``(N, d)``:

.. math::
    \mathrm{NumRank}(X) = \frac{\|X\|_F^2}{\|X\|_2^2} = \frac{\sum_i \sigma_i^2}{\sigma_1^2},\qquad
    \mathrm{Erank}(X) = \exp\Big(-\sum_i p_i \log p_i\Big),\quad p_i = \frac{\sigma_i}{\sum_j \sigma_j}

(the numerical, or stable, rank and Roy & Vetterli's effective rank).  Both lie in
``[1, rank(X)]``, equal 1 exactly on rank-1 features (every node a multiple of one vector, the
collapse the paper proves) and ``min(N, d)`` on features with equal singular values; unlike the
integer rank they are continuous, so a collapse shows before it is complete.  The zero matrix has
rank 0 by convention, and features holding a non-finite value (a diverged replica) have rank NaN:
the ranks are undefined there, and a deep model's diagnosis must go on for its other replicas.
Computed in float64 on the CPU or the features' device.
"""
from __future__ import annotations

from typing import Any, Dict

import torch
from torch import Tensor, nn

from zoo._names import unknown_name_error
from zoo.diagnostics.oversmoothing import layer_representations
from zoo.diagnostics.schedule import GraphRecorder
from zoo.graph import GraphLike

__all__ = ["numerical_rank", "effective_rank", "RANKS", "equal_rows_distance", "rank_trace", "RankRecorder"]


def _singular_values(x: Tensor) -> Tensor:
    if x.dim() != 2:
        raise ValueError(f"rank diagnostics need (N, d) features, got shape {tuple(x.shape)}")
    return torch.linalg.svdvals(x.detach().double())


def numerical_rank(x: Tensor) -> float:
    r""":math:`\|X\|_F^2 / \|X\|_2^2` of ``x`` ``(N, d)`` (0 for the zero matrix, NaN for
    non-finite features)."""
    if not bool(torch.isfinite(x).all()):
        return float("nan")
    s = _singular_values(x)
    top = float(s[0]) if s.numel() else 0.0
    return float(s.pow(2).sum()) / top ** 2 if top > 0 else 0.0


def effective_rank(x: Tensor) -> float:
    r"""Roy & Vetterli's effective rank :math:`\exp H(p)`, ``p`` the singular values of ``x``
    ``(N, d)`` normalised to sum 1 (0 for the zero matrix, NaN for non-finite features)."""
    if not bool(torch.isfinite(x).all()):
        return float("nan")
    s = _singular_values(x)
    total = float(s.sum())
    if total <= 0:
        return 0.0
    p = s / total
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


RANKS = {"numerical_rank": numerical_rank, "effective_rank": effective_rank}


def equal_rows_distance(x: Tensor) -> float:
    r""":math:`\|X - \mathbf 1 \bar x^\top\|_F / \|X\|_F` of ``x`` ``(N, d)``, :math:`\bar x` the mean
    row: the relative distance to the subspace where every node holds the same vector (0 exactly
    there, at most 1; 0 for the zero matrix, NaN for non-finite features).  A rank-one ``X = u v^T``
    with unequal ``u`` is still far from it: the rank says whether the features span one direction,
    this says whether the nodes have become one point."""
    if not bool(torch.isfinite(x).all()):
        return float("nan")
    x = x.detach().double()
    total = float(torch.linalg.vector_norm(x))
    return float(torch.linalg.vector_norm(x - x.mean(dim=0, keepdim=True))) / total if total > 0 else 0.0


def rank_trace(model: nn.Module, graph: GraphLike, x: Tensor, rank: str = "effective_rank",
               include_input: bool = False) -> Tensor:
    """``rank`` (``effective_rank`` or ``numerical_rank``) of every layer's output, ``(L,)``
    float64 (``(L + 1,)`` with the input features first when ``include_input``); the layer
    outputs are read from the model's taps (:func:`zoo.diagnostics.layer_representations`)."""
    if rank not in RANKS:
        raise unknown_name_error("rank", rank, RANKS)
    reps = ([x] if include_input else []) + layer_representations(model, graph, x)
    return torch.tensor([RANKS[rank](r) for r in reps], dtype=torch.float64)


class RankRecorder(GraphRecorder):
    """The companion of :class:`~zoo.diagnostics.EnergyRecorder`: both ranks of every layer's
    output, of every replica, every ``every`` epochs.  ``history`` is a list of
    ``{"epoch": e, "numerical_rank": [[per layer] per replica], "effective_rank": [...]}``."""

    def on_epoch_end(self, state: Any) -> None:
        inputs = self.due(state)
        if inputs is None:
            return
        graph, x = inputs
        entry: Dict[str, Any] = {"epoch": int(state.epoch), **{k: [] for k in RANKS}}
        for r in range(state.size):
            reps = layer_representations(state.replica(r), graph, x)
            for name, fn in RANKS.items():
                entry[name].append([fn(rep) for rep in reps])
        self.history.append(entry)
