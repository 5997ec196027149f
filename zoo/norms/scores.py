r"""The contract between attention layers and score norms: one typed record per *kind* of score.

A score norm never reads a layer's attributes.  As in jraph, where the attention logits are a
function ``attention_logit_fn(sender_features, receiver_features, edges)`` rather than a property
of a module, an attention layer hands the norm a record holding every tensor its score is a
function of, and the norm has one rule per record type.  A model family declares the kind of its
layers' score (``score_kind`` on :class:`zoo.nn.DeepGNN` / :class:`zoo.nn.AttentionStack`); a new
family whose score is of an existing kind gets every score norm without a line in ``zoo/norms/``.

Kinds (:data:`SCORE_KINDS`), for edge ``u -> v`` and head ``h``:

* ``"additive"`` — :class:`AdditiveScores`: the sum of a source term and a target term (GAT v1,
  GATDB, GATNB; the latter two add their biases after the norm)

  .. math:: s_{uv} = a_s^\top x_u + a_t^\top x_v

* ``"mlp"`` — :class:`MLPScores`: a one-hidden-layer perceptron of the pair (GATv2)

  .. math:: s_{uv} = a^\top \mathrm{LeakyReLU}(z_{uv}),\qquad z_{uv} = W_s h_u + W_t h_v\,[+ \dots]

* ``"dot_product"`` — :class:`DotProductScores`: query times key (transformers, SAN, UniMP)

  .. math:: s_{uv} = q_v^\top k_u

Shapes: scores ``(E, H)``; node tensors ``(N, H, C)``; per-edge hidden tensors ``(E, H, C)``;
attention vectors ``(H, C)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, FrozenSet, Protocol, Union, runtime_checkable

import torch.nn.functional as F
from torch import Tensor

from zoo.graph import Graph

ADDITIVE = "additive"
MLP = "mlp"
DOT_PRODUCT = "dot_product"


@dataclass(frozen=True, eq=False)  # tensors: compared by identity, not elementwise
class AdditiveScores:
    """Raw additive scores (before any nonlinearity or bias) and what they are made of.

    ``scores[e, h] = (nodes[src[e], h] * att_src[h]).sum() + (nodes[dst[e], h] * att_dst[h]).sum()``
    with ``nodes`` the projected features ``W h`` ``(N, H, C)``."""

    score_kind: ClassVar[str] = ADDITIVE
    graph: Graph
    nodes: Tensor
    att_src: Tensor
    att_dst: Tensor
    scores: Tensor


@dataclass(frozen=True, eq=False)  # tensors: compared by identity, not elementwise
class MLPScores:
    """The pre-activation ``hidden`` ``(E, H, C)`` of a perceptron score; the norm returns the
    normalised scores ``(E, H)`` in place of :meth:`raw`."""

    score_kind: ClassVar[str] = MLP
    graph: Graph
    hidden: Tensor
    att: Tensor
    negative_slope: float

    def raw(self) -> Tensor:
        """The unnormalised scores ``a^T LeakyReLU(hidden)`` ``(E, H)``."""
        return (F.leaky_relu(self.hidden, self.negative_slope) * self.att).sum(-1)


@dataclass(frozen=True, eq=False)  # tensors: compared by identity, not elementwise
class DotProductScores:
    """Raw, unscaled dot-product scores ``scores[e, h] = query[dst[e], h] . key[src[e], h]`` with the
    queries, keys and values ``(N, H, C)`` they come from (values: the norm may bound by them)."""

    score_kind: ClassVar[str] = DOT_PRODUCT
    graph: Graph
    query: Tensor
    key: Tensor
    value: Tensor
    scores: Tensor


Scores = Union[AdditiveScores, MLPScores, DotProductScores]
SCORE_KINDS = (ADDITIVE, MLP, DOT_PRODUCT)


@runtime_checkable
class ScoreNorm(Protocol):
    """A norm plugin of kind ``"scores"``: it has a rule for each kind in ``score_kinds`` and the
    attention layers call :meth:`normalize` with a record of their kind."""

    name: str
    kind: str  # "scores"
    score_kinds: FrozenSet[str]

    def normalize(self, scores: Scores) -> Tensor:
        """Normalised scores ``(E, H)`` for ``scores`` (a record of one of ``score_kinds``)."""


__all__ = ["ADDITIVE", "MLP", "DOT_PRODUCT", "SCORE_KINDS", "AdditiveScores", "MLPScores", "DotProductScores",
           "Scores", "ScoreNorm"]
