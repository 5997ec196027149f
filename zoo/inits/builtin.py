"""Built-in initialisation plugins."""
from __future__ import annotations

import torch
from torch import nn

from zoo.inits import register_init


@register_init("xavier", aliases=("xav", "glorot"))
def xavier(model: nn.Module) -> None:
    """Xavier/Glorot for feature and attention weights (each layer's ``reset_parameters``);
    linear skips start at zero."""
    layers = getattr(model, "layers", None)
    targets = list(layers) if layers is not None else [m for m in model.children()]
    for layer in targets:
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
    for skip in getattr(model, "skips", []):
        with torch.no_grad():
            skip.weight.zero_()
