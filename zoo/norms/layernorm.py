"""LayerNorm plugin: normalise every node's representation over its features (Ba et al. 2016).

Shapes: ``(N, dim)`` -> ``(N, dim)``; statistics are per node, so unlike PairNorm the result
does not depend on the other nodes.
"""
from __future__ import annotations

from torch import nn

from zoo.norms._registry import register_norm
from zoo.norms.features import check_placement


@register_norm("layernorm", aliases=("layer_norm", "ln"))
class LayerNormPlugin:
    """LayerNorm plugin (a :class:`zoo.norms.FeatureNorm`).

    Args:
        placement: ``post`` (after each hidden layer's aggregation, default) or ``pre``.
        affine: learn the per-feature gain and bias (default ``True``).
        eps: added to the variance.
    """

    name = "layernorm"

    def __init__(self, placement: str = "post", affine: bool = True, eps: float = 1e-5) -> None:
        self.placement, self.affine, self.eps = check_placement(placement), affine, eps

    def make(self, dim: int) -> nn.Module:
        return nn.LayerNorm(dim, eps=self.eps, elementwise_affine=self.affine)

    def __repr__(self) -> str:
        return f"LayerNormPlugin(placement={self.placement!r}, affine={self.affine})"
