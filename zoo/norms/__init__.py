"""Normalisation plugins.

A norm plugin is chosen by name (``zoo.build(..., norm="pairnorm", norm_kwargs={...})``) and is
one of two kinds, each its own contract:

* a :class:`FeatureNorm` (:mod:`zoo.norms.features`) — a module applied to node representations
  between layers; :meth:`FeatureNorm.make` builds one per hidden layer and ``placement`` says
  whether it runs before each layer (``"pre"``), after each hidden layer's aggregation, before the
  activation (``"post"``), or after each hidden layer's activation (``"post_activation"``).
* a :class:`ScoreNorm` (:mod:`zoo.norms.scores`) — normalises attention *scores* inside attention
  layers (LipschitzNorm); the plugin object is handed to every layer, which calls
  ``plugin.normalize(record)`` with a typed record of its score kind (additive, mlp, dot_product).
  Its ``score_kinds`` are those it has a rule for (:class:`ScoreRules` derives them from the rules);
  a model whose score kind is not among them, or that has no attention scores, refuses it at build
  time with a clear error.

Register a new one with :func:`register_norm`.  Plugin modules register themselves on import, one
line each below.
"""
from zoo.norms._registry import NORMS, NoNorm, NormFactory, NormPlugin, list_norms, register_norm, resolve_norm
from zoo.norms.features import PLACEMENTS, FeatureNorm
from zoo.norms.scores import SCORE_KINDS, AdditiveScores, DotProductScores, MLPScores, ScoreNorm, ScoreRules, score_rule

from zoo.norms import lipschitz  # noqa: E402,F401
from zoo.norms import pairnorm  # noqa: E402,F401
from zoo.norms import layernorm  # noqa: E402,F401
from zoo.norms import batchnorm  # noqa: E402,F401
from zoo.norms import graphnorm_v2  # noqa: E402,F401

__all__ = ["NORMS", "NoNorm", "NormFactory", "NormPlugin", "list_norms", "register_norm", "resolve_norm",
           "FeatureNorm", "PLACEMENTS", "SCORE_KINDS", "ScoreNorm", "ScoreRules", "score_rule", "AdditiveScores",
           "MLPScores", "DotProductScores"]
