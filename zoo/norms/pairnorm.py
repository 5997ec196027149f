r"""PairNorm (Zhao & Akoglu, ICLR 2020): keep the total pairwise distance of node
representations constant so that deep GNNs cannot collapse them.

With column means :math:`\bar x = \frac1n\sum_i x_i` and :math:`x^c_i = x_i - \bar x`:

* ``PN``:     :math:`x'_i = s\, x^c_i / \sqrt{\tfrac1n \sum_j \|x^c_j\|^2}` (columns centred,
  root-mean-square row norm ``s``);
* ``PN-SI``:  :math:`x'_i = s\, x^c_i / \|x^c_i\|` (scale individually: every row norm ``s``);
* ``PN-SCS``: :math:`x'_i = s\, x_i / \|x_i\| - \bar x` (scale and centre simultaneously).

Shapes: ``(N, dim)`` -> ``(N, dim)``; statistics run over all ``N`` nodes of the graph.
"""
from __future__ import annotations

from torch import Tensor, nn

from zoo._names import normalize_name, unknown_name_error
from zoo.norms._registry import register_norm
from zoo.norms.features import check_placement

MODES = {"pn": "PN", "pn_si": "PN-SI", "pn_scs": "PN-SCS"}


class PairNorm(nn.Module):
    """The PairNorm module (no parameters). See the module docstring for the three modes."""

    def __init__(self, mode: str = "PN", scale: float = 1.0, eps: float = 1e-6) -> None:
        super().__init__()
        key = normalize_name(mode)
        if key not in MODES:
            raise unknown_name_error("PairNorm mode", mode, MODES.values())
        if not scale > 0:
            raise ValueError(f"PairNorm scale s must be > 0, got {scale}")
        self.mode, self.scale, self.eps = MODES[key], float(scale), eps

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(dim=0, keepdim=True)
        if self.mode == "PN-SCS":
            return self.scale * x / (self.eps + x.pow(2).sum(-1, keepdim=True)).sqrt() - mean
        centred = x - mean
        if self.mode == "PN":
            return self.scale * centred / (self.eps + centred.pow(2).sum(-1).mean()).sqrt()
        return self.scale * centred / (self.eps + centred.pow(2).sum(-1, keepdim=True)).sqrt()

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, scale={self.scale}"


@register_norm("pairnorm", aliases=("pair_norm", "pn"))
class PairNormPlugin:
    """PairNorm plugin (a :class:`zoo.norms.FeatureNorm`).

    Args:
        mode: ``PN`` (default), ``PN-SI`` or ``PN-SCS``.
        scale: the scale ``s`` (default 1).
        placement: ``post`` (after each hidden layer's aggregation, before the activation, as in
            Zhao & Akoglu), ``pre``, or ``post_activation`` (after each hidden layer's
            activation: the LipschitzNorm authors' DeepGAT applies PyG's PairNorm after the ELU).
    """

    name = "pairnorm"

    def __init__(self, mode: str = "PN", scale: float = 1.0, placement: str = "post") -> None:
        PairNorm(mode, scale)  # validate eagerly: a bad option fails at build time
        self.mode, self.scale, self.placement = mode, scale, check_placement(placement)

    def make(self, dim: int) -> nn.Module:
        return PairNorm(self.mode, self.scale)

    def __repr__(self) -> str:
        return f"PairNormPlugin(mode={self.mode!r}, scale={self.scale}, placement={self.placement!r})"
