"""Compositions copied from one paper's code, registered as named plugins of the generic machinery.

The generic model (:class:`zoo.nn.base.DeepGNN`) has hooks — input encoders
(:mod:`zoo.nn.encoders`), output heads (:mod:`zoo.nn.heads`); a module here registers one
paper's choices under the option values its suites use, so the option names, resolved configs
and cell ids stay those of the suites.  Importing :mod:`zoo` imports this package.

* :mod:`zoo.papers.lipschitz` — the LipschitzNorm authors' ``DeepGAT`` (``input_encoder="affine"``,
  ``classifier="linear"``).
"""
from zoo.papers import lipschitz  # noqa: F401  (registers its plugins)

__all__ = ["lipschitz"]
