"""Validation shared by the models, as resolvers (PyG ``nn/resolver.py`` style): each takes an
option as the user wrote it and returns it in the form the model stores (a canonical name, a
module, a plugin), or raises one clear line naming the problem and the fix.

* option checks: :func:`positive_int` (:mod:`zoo._names`'s, torch-free), :func:`real_number`, :func:`probability`;
* :class:`~zoo.nn.DeepGNN`'s options: :func:`resolve_classifier`, :func:`check_encoder_options`,
  :func:`resolve_hidden_heads`, :func:`resolve_residual`, :func:`resolve_activation`;
* norms: :func:`resolve_score_norm` (a ``scores`` plugin against the model's score kind) and
  :func:`resolve_block_norms` (transformer-style blocks); :func:`check_stack_options`
  (:class:`~zoo.nn.AttentionStack` families);
* inputs at run time: :func:`check_node_features` (with its once-per-tensor NaN/inf scan) and
  :func:`check_edge_inputs`.
"""
from __future__ import annotations

import math
import os
import weakref
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from zoo._names import normalize_name, positive_int, unknown_name_error
from zoo.nn.encoders import check_edge_features
from zoo.nn.heads import CLASSIFIERS
from zoo.norms import FeatureNorm, NormPlugin, ScoreNorm, resolve_norm

#: Set ``ZOO_CHECK_INPUTS=0`` to skip the NaN/inf scan of node features in every model.
CHECK_INPUTS_ENV = "ZOO_CHECK_INPUTS"


def real_number(name: str, value: Any, low: float = -math.inf, high: float = math.inf,
                high_open: bool = False) -> float:
    """``value`` if it is a finite real (not a bool) in ``[low, high]`` (``[low, high)`` if ``high_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not (low <= value and (value < high if high_open else value <= high)):
        raise ValueError(f"{name} must be in [{low}, {high}{')' if high_open else ']'}, got {value!r}")
    return value


def probability(name: str, value: Any) -> float:
    """``value`` if it is a real number in ``[0, 1)`` (a dropout probability)."""
    return real_number(name, value, 0.0, 1.0, high_open=True)


# name -> (module factory, positively homogeneous?).  Homogeneity (phi(ax) = a phi(x), a > 0)
# is what the conservation law of the balance paper needs (Theorem 2.2).
ACTIVATIONS: Dict[str, Tuple[Any, bool]] = {
    "relu": (nn.ReLU, True),
    "leaky_relu": (nn.LeakyReLU, True),
    "identity": (nn.Identity, True),
    "elu": (nn.ELU, False),
    "gelu": (nn.GELU, False),
    "tanh": (nn.Tanh, False),
}
RESIDUALS = ("none", "identity", "linear", "affine")
DROPOUT_POSITIONS = ("input", "output")
CLASSIFIER_INPUTS = ("raw", "activated")
HIDDEN_HEADS = ("concat", "mean")


def resolve_activation(name: Union[str, nn.Module]) -> Tuple[nn.Module, bool]:
    """``(module, positively homogeneous?)`` for an activation name (:data:`ACTIVATIONS`) or module."""
    if isinstance(name, nn.Module):
        return name, isinstance(name, (nn.ReLU, nn.LeakyReLU, nn.Identity))
    key = normalize_name(name)
    if key not in ACTIVATIONS:
        raise unknown_name_error("activation", name, ACTIVATIONS)
    factory, homogeneous = ACTIVATIONS[key]
    return factory(), homogeneous


def resolve_residual(name: str) -> str:
    """The canonical residual name (:data:`RESIDUALS`)."""
    key = normalize_name(name)
    if key not in RESIDUALS:
        raise unknown_name_error("residual", key, RESIDUALS)
    return key


def resolve_choice(option: str, value: str, choices: tuple) -> str:
    """``value`` normalised, if it is one of ``choices`` (else one line naming them)."""
    key = normalize_name(value)
    if key not in choices:
        raise unknown_name_error(option, key, choices)
    return key


def resolve_classifier_input(owner: str, value: str, classifier: str) -> str:
    """``raw`` / ``activated`` (:data:`CLASSIFIER_INPUTS`); ``activated`` needs a separate classifier."""
    key = resolve_choice("classifier_input", value, CLASSIFIER_INPUTS)
    if key == "activated" and classifier == "none":
        raise ValueError(f"{owner}: classifier_input='activated' activates the last layer before a separate "
                         "classifier, but this model has none (classifier='none'); set classifier='linear' "
                         "or drop classifier_input")
    return key


def check_activated_classifier_input(owner: str, classifier_input: str, act: nn.Module, norm_placement: Optional[str],
                                     output_dropout: float) -> None:
    """``classifier_input='activated'`` gives the last layer the hidden layers' activation, feature norm and
    output dropout; refused where all three are absent (it would change nothing)."""
    if classifier_input == "activated" and isinstance(act, nn.Identity) and norm_placement is None \
            and not output_dropout:
        raise ValueError(f"{owner}: classifier_input='activated' would change nothing here (activation "
                         "'identity', no feature norm, no output dropout); drop it or choose an activation")


def resolve_classifier(name: Optional[str], out_heads: Optional[int]) -> str:
    """The canonical classifier name (``None`` -> ``"none"``); ``out_heads`` belongs to the output
    attention layer, which a separate classifier replaces."""
    classifier = CLASSIFIERS.canonical(name or "none")
    if classifier != "none" and out_heads is not None:
        raise ValueError(
            f"out_heads={out_heads} sets the heads of the output attention layer, but with classifier="
            f"{classifier!r} every message-passing layer is a hidden layer (heads concatenated) and the "
            "classifier gives the output; drop out_heads"
        )
    return classifier


def check_encoder_options(owner: str, input_encoder: Any, input_encoder_dim: Optional[int], edge_encoder: Any,
                          supports_edge_features: bool, edge_dim: Optional[int] = None) -> None:
    """An encoder width needs its encoder; an edge encoder needs layers with an edge term."""
    if input_encoder_dim is not None and input_encoder is None:
        raise ValueError(f"input_encoder_dim={input_encoder_dim} is the width of the input encoder's output, "
                         "but no input_encoder is set; add e.g. input_encoder='affine' or drop input_encoder_dim")
    if edge_dim is not None and edge_encoder is None:
        raise ValueError(f"edge_dim={edge_dim} is the number of raw edge-feature columns the edge encoder reads, "
                         "but no edge_encoder is set; add edge_encoder='linear' (or 'bond') or drop edge_dim")
    if edge_encoder is not None and not supports_edge_features:
        raise ValueError(
            f"{owner} layers have no edge-feature term, so edge_encoder={edge_encoder!r} cannot be used; use "
            "gatv2 or gatdb (their attention score adds W_e e_uv), or leave edge_encoder unset to ignore edge features"
        )


def resolve_hidden_heads(owner: str, name: str, heads: int, out_heads: Optional[int], hidden_dim: int,
                         supports_heads: bool) -> str:
    """The canonical way hidden layers combine their heads (:data:`HIDDEN_HEADS`), checked against
    the family (attention heads at all?) and the width (``concat`` splits ``hidden_dim``)."""
    if not supports_heads and (heads != 1 or out_heads not in (None, 1)):
        raise ValueError(f"{owner} has no attention heads; leave heads/out_heads at 1 "
                         "(use an attention model such as gat for multi-head)")
    key = normalize_name(name)
    if key not in HIDDEN_HEADS:
        raise unknown_name_error("hidden_heads", key, HIDDEN_HEADS)
    if key == "mean" and not supports_heads:
        raise ValueError(f"{owner} has no attention heads to average; drop hidden_heads='mean'")
    if key == "concat" and hidden_dim % heads:
        raise ValueError(
            f"hidden_dim={hidden_dim} is not divisible by heads={heads}: hidden_dim is the width of all "
            f"heads together; use e.g. hidden_dim={heads * max(1, hidden_dim // heads)}"
        )
    return key


def resolve_score_norm(plugin: NormPlugin, owner: str, score_kind: Optional[str]) -> Optional[ScoreNorm]:
    """``plugin`` if it normalises attention scores (a :class:`zoo.norms.ScoreNorm`) and has a rule for
    the model's ``score_kind`` (:mod:`zoo.norms.scores`), ``None`` for any other kind of norm."""
    if not isinstance(plugin, ScoreNorm):
        return None
    if score_kind is None:
        raise ValueError(f"norm {plugin.name!r} normalises attention scores, but {owner} has no attention scores; "
                         "use a feature norm (pairnorm, layernorm) or an attention model")
    if score_kind not in plugin.score_kinds:
        raise ValueError(f"norm {plugin.name!r} has no rule for {score_kind} scores ({owner}'s kind; it has rules "
                         f"for {', '.join(sorted(plugin.score_kinds))}); add one to the norm or use a feature norm")
    return plugin


def resolve_block_norms(norm: Any, norm_kwargs: Optional[Dict[str, Any]], owner: str,
                        score_kind: Optional[str]) -> Tuple[Optional[ScoreNorm], Optional[FeatureNorm]]:
    """``(score_norm, feature_norm)`` for a transformer-style model: a ``scores`` plugin normalises
    the attention scores, a ``features`` plugin replaces the blocks' LayerNorm, ``none`` keeps it."""
    plugin = resolve_norm(norm, **(norm_kwargs or {}))
    score_norm = resolve_score_norm(plugin, owner, score_kind)
    if score_norm is not None:
        return score_norm, None
    if not isinstance(plugin, FeatureNorm):
        return None, None
    if getattr(plugin, "reads_graph", False):
        raise ValueError(f"norm {plugin.name!r} reads the graph, but {owner}'s blocks normalise features "
                         "without one; use it with a message-passing model (DeepGNN families) or pick "
                         "layernorm / batchnorm / pairnorm")
    return None, plugin


def check_stack_options(hidden_dim: int, heads: int, dropout: float, attn_dropout: float) -> None:
    """The sizes and dropouts of an :class:`~zoo.nn.AttentionStack` family (heads split ``hidden_dim``)."""
    positive_int("hidden_dim", hidden_dim)
    positive_int("heads", heads)
    if hidden_dim % heads:
        raise ValueError(f"hidden_dim={hidden_dim} must be a positive multiple of heads={heads} "
                         f"(the heads split hidden_dim evenly), e.g. hidden_dim={heads * max(1, hidden_dim // heads)}")
    probability("dropout", dropout)
    probability("attn_dropout", attn_dropout)


class _SeenInputs:
    """Feature tensors already scanned for NaN/inf, keyed by ``id`` and checked against the
    tensor's version counter (an in-place change re-triggers the scan); like zoo.graph's cache."""

    def __init__(self) -> None:
        self._seen: Dict[int, Tuple[Any, int]] = {}

    def hit(self, x: Tensor, version: Optional[int]) -> bool:
        entry = self._seen.get(id(x))
        return entry is not None and version is not None and entry[0]() is x and entry[1] == version

    def add(self, x: Tensor, version: Optional[int]) -> None:
        if version is None:
            return
        key = id(x)
        if key not in self._seen:
            weakref.finalize(x, self._seen.pop, key, None)
        self._seen[key] = (weakref.ref(x), version)


_SEEN = _SeenInputs()


def _version(x: Tensor) -> Optional[int]:
    try:
        return x._version
    except RuntimeError:  # inference tensors have no version counter: scan every time
        return None


# torch.compiler.is_compiling is torch >= 2.3; torch 2.2 (the DGL environment) has dynamo's own.
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling


def _autocast_enabled(device_type: str) -> bool:
    """``torch.is_autocast_enabled(device_type)``; torch < 2.4 takes no argument (CUDA) and has a CPU twin."""
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:
        return torch.is_autocast_cpu_enabled() if device_type == "cpu" else torch.is_autocast_enabled()


def _scan_skipped(x: Tensor) -> bool:
    functorch = getattr(torch._C, "_functorch", None)
    if functorch is not None and functorch.is_batchedtensor(x):  # values are per-replica: not readable here
        return True
    return x.device.type == "meta" or _is_compiling()


def check_node_features(model: nn.Module, x: Any, in_dim: int) -> None:
    """Check a model's node features: a floating ``(N, in_dim)`` tensor of the parameters' dtype,
    and (unless switched off) free of NaN/inf.

    The value scan runs once per feature tensor (cached by identity and version counter, so a
    training loop that passes the same ``x`` every epoch pays for it once).  Switch it off per
    model with ``zoo.build(..., check_inputs=False)`` / ``model.check_inputs = False``, or for
    every model with the environment variable ``ZOO_CHECK_INPUTS=0``.
    """
    owner = type(model).__name__
    if not isinstance(x, Tensor):
        raise TypeError(f"{owner}: node features x must be a torch.Tensor of shape (N, {in_dim}), "
                        f"got {type(x).__name__}")
    if x.dim() != 2 or x.size(1) != in_dim:
        got = f"{x.size(1)}" if x.dim() == 2 else f"a tensor of shape {tuple(x.shape)}"
        raise ValueError(f"{owner}: expected node features of shape (N, in_dim) with in_dim={in_dim} features, "
                         f"got {got}; build the model with in_dim=x.size(1) or pass the matching features")
    # A model with an input encoder (e.g. OGB's AtomEncoder) reads raw columns of any dtype.
    if getattr(model, "input_encoder", None) is None:
        if not x.is_floating_point():
            raise TypeError(f"{owner}: node features must be floating point, got dtype {x.dtype}; "
                            "convert them with x.float() (integer category ids need an input encoder)")
        param = next(iter(model.parameters()), None)
        if (param is not None and param.is_floating_point() and x.dtype != param.dtype
                and not _autocast_enabled(x.device.type)):
            raise TypeError(f"{owner}: node features have dtype {x.dtype} but the model's parameters are "
                            f"{param.dtype}; convert one of them (x.to({param.dtype}) or model.to({x.dtype}))")
    if (not x.is_floating_point() or not getattr(model, "check_inputs", True)
            or os.environ.get(CHECK_INPUTS_ENV, "1") == "0" or _scan_skipped(x)):
        return
    version = _version(x)
    if _SEEN.hit(x, version):
        return
    # One reduction: a NaN/inf anywhere makes the sum non-finite (a finite overflow only sends us
    # to the exact elementwise test below).
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):
        bad = (~torch.isfinite(x)).nonzero()
        row, col = (int(v) for v in bad[0])
        raise ValueError(
            f"{owner}: node features contain {bad.size(0)} NaN/inf value(s) (first at row {row}, column {col}: "
            f"{x[row, col].item()}); clean the data (e.g. torch.nan_to_num) or skip this check with "
            f"zoo.build(..., check_inputs=False) / {CHECK_INPUTS_ENV}=0"
        )
    _SEEN.add(x, version)


__all__ = ["check_activated_classifier_input", "ACTIVATIONS", "CHECK_INPUTS_ENV", "CLASSIFIER_INPUTS", "DROPOUT_POSITIONS", "HIDDEN_HEADS", "RESIDUALS", "check_edge_inputs", "check_encoder_options", "resolve_choice",
           "check_node_features", "check_stack_options", "positive_int", "probability", "real_number",
           "resolve_activation", "resolve_block_norms", "resolve_classifier", "resolve_classifier_input", "resolve_hidden_heads",
           "resolve_residual", "resolve_score_norm"]


def check_edge_inputs(model: nn.Module, edge_attr: Any, encoder: nn.Module, num_edges: int) -> None:
    """Check a model's raw edge features (:func:`zoo.nn.encoders.check_edge_features`): shape,
    rows, dtype and — like the node features: once per tensor, with the same opt-outs — NaN/inf."""
    scan = (isinstance(edge_attr, Tensor) and getattr(model, "check_inputs", True)
            and os.environ.get(CHECK_INPUTS_ENV, "1") != "0" and not _scan_skipped(edge_attr)
            and not _SEEN.hit(edge_attr, _version(edge_attr)))
    owner = getattr(model, "family", None) or type(model).__name__
    check_edge_features(owner, edge_attr, encoder, num_edges, scan_values=scan)
    if scan:
        _SEEN.add(edge_attr, _version(edge_attr))
