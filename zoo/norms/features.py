"""The contract between the depth machinery and feature norms: a :class:`FeatureNorm` makes one
module per hidden representation and says where it runs (:data:`PLACEMENTS`)."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import nn

from zoo._names import normalize_name, unknown_name_error

#: where a feature norm runs: before each layer (``pre``), after each hidden layer's aggregation and
#: before its activation (``post``), or after each hidden layer's activation (``post_activation``)
PLACEMENTS = ("pre", "post", "post_activation")


@runtime_checkable
class FeatureNorm(Protocol):
    """A norm plugin applied to node representations between layers (PairNorm, LayerNorm).

    :class:`zoo.nn.DeepGNN` calls :meth:`make` once per hidden layer and runs the modules at
    ``placement``; a transformer-style block uses them in place of its LayerNorm.

    A plugin whose modules also read the forward's graph (GraphNormv2's eigenbasis) sets the
    optional class attribute ``reads_graph = True``: its modules are called as ``module(x, graph)``
    (``(N, dim)`` and a :class:`zoo.graph.Graph`), and a transformer-style block refuses it."""

    name: str
    placement: str

    def make(self, dim: int) -> nn.Module:
        """A fresh module for representations of width ``dim``: ``(N, dim) -> (N, dim)``."""


def check_placement(placement: str) -> str:
    """The canonical placement (:data:`PLACEMENTS`), or one line naming the valid ones."""
    key = normalize_name(placement)
    if key not in PLACEMENTS:
        raise unknown_name_error("norm placement", placement, PLACEMENTS)
    return key


__all__ = ["FeatureNorm", "PLACEMENTS", "check_placement"]
