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
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Protocol, Type, Union, runtime_checkable

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
    """A norm plugin that normalises attention scores inside attention layers (LipschitzNorm): it has a
    rule for each kind in ``score_kinds`` and the layers call :meth:`normalize` with a record of their
    kind.  :class:`ScoreRules` gives both from the rules a norm writes."""

    name: str
    score_kinds: FrozenSet[str]

    def normalize(self, scores: Scores) -> Tensor:
        """Normalised scores ``(E, H)`` for ``scores`` (a record of one of ``score_kinds``)."""


def score_rule(record: Type[Any]) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    """Mark a method of a :class:`ScoreRules` norm as its rule for records of type ``record``."""

    def decorator(method: Callable[..., Tensor]) -> Callable[..., Tensor]:
        method.score_record = record  # type: ignore[attr-defined]
        return method

    return decorator


class ScoreRules:
    """Base of a score norm written as one method per kind (:func:`score_rule`): its ``score_kinds``
    are the kinds of its rules and :meth:`normalize` calls the rule of the record's type, so a kind is
    accepted exactly when it has a rule."""

    name: str
    #: record type -> the name of the method that normalises it
    rules: ClassVar[Dict[type, str]] = {}
    score_kinds: ClassVar[FrozenSet[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        rules: Dict[type, str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                record = getattr(value, "score_record", None)
                if record is not None:
                    rules[record] = attr
        cls.rules = rules
        cls.score_kinds = frozenset(record.score_kind for record in rules)

    def normalize(self, scores: Scores) -> Tensor:
        """Normalised scores ``(E, H)``: the rule of ``scores``' kind."""
        rule = self.rules.get(type(scores))
        if rule is None:
            raise TypeError(f"{self.name} has rules for {sorted(self.score_kinds)} scores, got "
                            f"{type(scores).__name__}; pass one of zoo.norms.scores' records")
        return getattr(self, rule)(scores)


__all__ = ["ADDITIVE", "MLP", "DOT_PRODUCT", "SCORE_KINDS", "AdditiveScores", "MLPScores", "DotProductScores",
           "Scores", "ScoreNorm", "ScoreRules", "score_rule"]
