"""Normalisation plugins.

A norm plugin is chosen by name (``zoo.build(..., norm="pairnorm", norm_kwargs={...})``) and is
one of two kinds:

* ``"features"`` — a module applied to node representations between layers; the plugin's
  :meth:`NormPlugin.make` builds one per hidden layer and ``placement`` says whether it runs
  before each layer (``"pre"``), after each hidden layer's aggregation, before the
  activation (``"post"``), or after each hidden layer's activation (``"post_activation"``).
* ``"scores"`` — normalises attention *scores* inside attention layers (LipschitzNorm); the
  plugin object is handed to every layer, which calls ``plugin.normalize(record)`` with a typed
  record of its score kind (:mod:`zoo.norms.scores`: additive, mlp, dot_product).  The plugin
  lists the kinds it has a rule for (``score_kinds``); a model whose score kind is not among them,
  or that has no attention scores, refuses it at build time with a clear error.

Register a new one with :func:`register_norm`; it must satisfy :class:`NormPlugin` (and, for
kind ``"scores"``, :class:`ScoreNorm`).
"""
from zoo.norms._registry import NORMS, NoNorm, NormFactory, NormPlugin, list_norms, register_norm, resolve_norm
from zoo.norms.scores import SCORE_KINDS, AdditiveScores, DotProductScores, MLPScores, ScoreNorm

# Plugins living in their own modules register themselves on import.
from zoo.norms import builtin as _builtin  # noqa: E402,F401

__all__ = ["NORMS", "NoNorm", "NormFactory", "NormPlugin", "list_norms", "register_norm", "resolve_norm",
           "SCORE_KINDS", "ScoreNorm", "AdditiveScores", "MLPScores", "DotProductScores"]
