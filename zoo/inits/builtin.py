"""Built-in unbalanced initialisations: Xavier and Xavier with zero attention (balance paper, Table 1)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.parameter import UninitializedParameter

from zoo.inits import register_init


def zero_skips_(model: nn.Module) -> None:
    """Linear residual skips start at zero (the network then computes the plain stack at init)."""
    for skip in getattr(model, "skips", []):
        with torch.no_grad():
            skip.weight.zero_()


@register_init("xavier", aliases=("xav", "glorot"))
def xavier(model: nn.Module) -> None:
    """Xav: Xavier/Glorot uniform for feature and attention weights (each layer's
    ``reset_parameters``); biases, GATDB/GATNB score biases and linear skips start at zero."""
    layers = getattr(model, "layers", None)
    targets = list(layers) if layers is not None else [m for m in model.children()]
    for layer in targets:
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
        xi = getattr(layer, "xi", None)
        if isinstance(xi, nn.Parameter) and not isinstance(xi, UninitializedParameter):
            with torch.no_grad():
                xi.zero_()
    zero_skips_(model)


@register_init("xavier_zero_att", aliases=("xav_z", "xavier_zero_attention", "xavz"))
def xavier_zero_att(model: nn.Module) -> None:
    """Xav_Z: Xavier feature weights, zero attention parameters.

    With ``a = 0`` every score is zero (GATDB/GATNB biases start at zero too), so the attention is
    uniform, ``alpha_uv = 1 / |N(v)|``, at initialisation (balance paper §3, ablation of Fig. 4-6).
    """
    xavier(model)
    for layer in getattr(model, "layers", []):
        for p in layer.attention_params() if hasattr(layer, "attention_params") else []:
            with torch.no_grad():
                p.zero_()
