"""The Xavier initialisations: Xavier, Xavier with PyG's attention fans, and Xavier with zero attention
(balance paper, Table 1); unbalanced.  They see a model only through its layers' ``LayerProtocol``."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.nn.parameter import UninitializedParameter

from zoo._names import normalize_name, unknown_name_error
from zoo.inits._registry import register_init
from zoo.symmetry import bias_params, feature_matrices

# Xavier draws a base init may ask for: the balance paper's text cites Glorot & Bengio [19] (their
# normalised init is uniform, the zoo's default); the authors' code draws ``xavier_normal_`` (initScheme
# ``xavierN`` in RelationalML/GAT_Balanced_Initialization, Code/runExp*.py).
XAVIER_DISTRIBUTIONS = ("uniform", "normal")


def zero_skips_(model: nn.Module) -> None:
    """Linear residual skips start at zero (the network then computes the plain stack at init);
    ``residual="affine"`` skips keep PyTorch's default init (Luo et al.'s code)."""
    if getattr(model, "residual", None) == "affine":
        return
    for skip in getattr(model, "skips", []):
        with torch.no_grad():
            skip.weight.zero_()


@register_init("xavier", aliases=("xav", "glorot"))
def xavier(model: nn.Module) -> None:
    """Xav: Xavier/Glorot uniform for feature and attention weights (each layer's
    ``reset_parameters``); biases (the layers' ``bias_params``, e.g. GATDB/GATNB score biases) and
    linear skips start at zero."""
    layers = getattr(model, "layers", None)
    targets = list(layers) if layers is not None else [m for m in model.children()]
    for layer in targets:
        if hasattr(layer, "reset_parameters"):
            layer.reset_parameters()
        with torch.no_grad():
            for p in bias_params(layer):
                if not isinstance(p, UninitializedParameter):
                    p.zero_()
    zero_skips_(model)


@register_init("xavier_pyg", aliases=("glorot_pyg", "xav_pyg"))
def xavier_pyg(model: nn.Module) -> None:
    """Xav with PyG's fans for the attention vectors: PyG's ``GATConv`` / ``GATv2Conv`` (and the LN
    authors' ``DeepGATConv``, gdasoulas/LipschitzNorm models/deepgat.py) store each ``a`` as
    ``(1, heads, channels)`` and ``glorot`` draws ``U(+-sqrt(6 / (heads + channels)))``; ``xavier``
    uses ``sqrt(6 / (1 + heads * channels))`` (the same for one head; 2.7x smaller at 8 x 64).
    Redraws every attention parameter that is one vector per head (``(heads, channels)``, in the
    layers' ``attention_params`` order); feature weights, biases and skips as ``xavier``."""
    xavier(model)
    found = False
    for layer in getattr(model, "layers", []):
        for att in layer.attention_params() if hasattr(layer, "attention_params") else []:
            if isinstance(att, nn.Parameter) and tuple(att.shape) == (layer.heads, layer.channels):
                found = True
                bound = (6.0 / (att.size(0) + att.size(1))) ** 0.5
                with torch.no_grad():
                    att.uniform_(-bound, bound)
    if not found:
        raise ValueError(f"init 'xavier_pyg' redraws attention vectors (one per head, as PyG stores them), and "
                         f"{type(model).__name__} has none; use init='xavier'")


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


def xavier_normal_features_(model: nn.Module) -> None:
    """Redraw every layer's feature matrices (``W_s``, ``W_t``, update) with ``xavier_normal_``
    (same fans as the uniform draw, so the same variance; only the distribution changes)."""
    with torch.no_grad():
        for layer in getattr(model, "layers", []):
            for w in feature_matrices(layer) if hasattr(layer, "outgoing_params") else []:
                if not isinstance(w, UninitializedParameter) and w.dim() == 2:
                    nn.init.xavier_normal_(w)


def xavier_base(distribution: str = "uniform") -> Callable[[nn.Module], None]:
    """The Xavier base init with feature matrices drawn from ``distribution`` (:data:`XAVIER_DISTRIBUTIONS`)."""
    key = normalize_name(distribution)
    if key not in XAVIER_DISTRIBUTIONS:
        raise unknown_name_error("Xavier distribution", distribution, XAVIER_DISTRIBUTIONS,
                                 hint="'normal' is the balance paper's code (xavier_normal_), 'uniform' the zoo's default.")
    if key == "uniform":
        return xavier

    def xavier_normal(model: nn.Module) -> None:
        xavier(model)
        xavier_normal_features_(model)

    return xavier_normal
