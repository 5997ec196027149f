"""Normalisation plugins.

A norm plugin is chosen by name (``zoo.build(..., norm="pairnorm", norm_kwargs={...})``) and is
one of two kinds:

* ``"features"`` — a module applied to node representations between layers; the plugin's
  :meth:`NormPlugin.make` builds one per hidden layer and ``placement`` says whether it runs
  before each layer (``"pre"``), after each hidden layer's aggregation, before the
  activation (``"post"``), or after each hidden layer's activation (``"post_activation"``).
* ``"scores"`` — normalises attention *scores* inside attention layers (LipschitzNorm); the
  plugin object is handed to every layer, which calls the plugin for its score type.
  Layers without attention reject it with a clear error.

Register a new one with :func:`register_norm`; it must satisfy :class:`NormPlugin`.
"""
from zoo.norms._registry import NORMS, NoNorm, NormFactory, NormPlugin, list_norms, register_norm, resolve_norm

# Plugins living in their own modules register themselves on import.
from zoo.norms import builtin as _builtin  # noqa: E402,F401

__all__ = ["NORMS", "NoNorm", "NormFactory", "NormPlugin", "list_norms", "register_norm", "resolve_norm"]
