r"""BatchNorm over the nodes of a graph (Ioffe & Szegedy 2015), as a feature norm between layers.

Every feature column is standardised with the statistics of the ``N`` nodes of the forward's
graph (full-batch training: all nodes, labelled or not), then scaled and shifted:

.. math:: x'_{ij} = \gamma_j\,\frac{x_{ij} - \mu_j}{\sqrt{\sigma_j^2 + \epsilon}} + \beta_j,\qquad
          \mu_j = \frac1N \sum_i x_{ij},\quad \sigma_j^2 = \frac1N \sum_i (x_{ij} - \mu_j)^2

In evaluation mode the running estimates (momentum ``0.1``) replace ``mu`` and ``sigma``, as
``torch.nn.BatchNorm1d``, which this is.  It is the norm of Luo et al.'s tuned GNNs
(NeurIPS 2024 D&B, code ``LUOyk1999/tunedGNN``: ``--bn``, after the residual sum and before the
ReLU, i.e. ``placement="post"``) and Scholkemper et al. (ICLR 2025) analyse it (§4.2 of their
abstract: the column-wise rescaling prevents a collapse to a one-dimensional subspace).

Shapes: ``(N, dim)`` -> ``(N, dim)``.
"""
from __future__ import annotations

from torch import nn

from zoo.norms._registry import register_norm
from zoo.norms.features import check_placement


@register_norm("batchnorm", aliases=("batch_norm", "bn"))
class BatchNormPlugin:
    """BatchNorm over the graph's nodes (a :class:`zoo.norms.FeatureNorm`; Luo et al.'s ``--bn``).

    Args:
        placement: ``post`` (after each layer's aggregation and skip, before the activation;
            default, as Luo et al.), ``pre`` or ``post_activation``.
        affine: learn ``gamma`` and ``beta`` (default ``True``).
        momentum: running-statistics momentum (torch's default ``0.1``).
        eps: added to the variance.
        track_running_stats: ``False`` normalises with the batch statistics in evaluation too.
    """

    name = "batchnorm"

    def __init__(self, placement: str = "post", affine: bool = True, momentum: float = 0.1, eps: float = 1e-5,
                 track_running_stats: bool = True) -> None:
        placement = check_placement(placement)
        if not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"batchnorm momentum must be in [0, 1], got {momentum}")
        self.placement, self.affine, self.momentum, self.eps = placement, affine, float(momentum), float(eps)
        self.track_running_stats = bool(track_running_stats)

    def make(self, dim: int) -> nn.Module:
        return nn.BatchNorm1d(dim, eps=self.eps, momentum=self.momentum, affine=self.affine,
                              track_running_stats=self.track_running_stats)

    def __repr__(self) -> str:
        return f"BatchNormPlugin(placement={self.placement!r}, affine={self.affine})"
