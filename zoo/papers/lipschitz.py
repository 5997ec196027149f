"""The LipschitzNorm authors' ``DeepGAT`` (Dasoulas et al., 2021; gdasoulas/LipschitzNorm
``models/deepgat.py`` @ 25ddec3) as zoo plugins.

Their model is ``h = lin(x)`` (a biased linear map to one head's width, 64), ``L`` attention
layers (``64 -> heads x 64``, then ``heads x 64`` wide, heads concatenated) and
``fc1 = nn.Linear(heads * 64, out)`` after the last layer.  In the zoo::

    zoo.build("gat", ..., input_encoder="affine", input_encoder_dim=64, classifier="linear")

(``benchmarks/suites/lipschitz_table3.toml``, the code-setup variants).  This module registers
the two pieces those options name:

* input encoder ``"affine"``: :class:`zoo.nn.encoders.LinearEncoder` with a bias (``self.lin``);
* classifier ``"linear"``: a biased ``nn.Linear(hidden_dim, out_dim)`` with PyTorch's default
  init (``fc1``; the init plugins reset only the attention layers, as the authors' code).
"""
from __future__ import annotations

from typing import Optional

from torch import nn

from zoo.nn.encoders import INPUT_ENCODERS, LinearEncoder
from zoo.nn.heads import register_classifier


def affine_encoder(in_dim: Optional[int], out_dim: int) -> nn.Module:
    """``W x + b``: the authors' ``DeepGAT.lin``. Shapes: ``(N, in_dim) -> (N, out_dim)``."""
    return LinearEncoder(in_dim, out_dim, bias=True)


INPUT_ENCODERS.add("affine", affine_encoder, aliases=("linear_bias", "biased_linear"))


@register_classifier("linear")
def linear_classifier(in_dim: int, out_dim: int) -> nn.Module:
    """``W h + b`` after the last attention layer: the authors' ``DeepGAT.fc1``.
    Shapes: ``(N, in_dim) -> (N, out_dim)``."""
    return nn.Linear(in_dim, out_dim)


__all__ = ["affine_encoder", "linear_classifier"]
