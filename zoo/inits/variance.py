r"""Variance-scaled inits for depth: the large-variance phase of Epping et al. and G-Init.

* ``large_variance`` — "Graph Neural Networks Do Not Always Oversmooth" (Epping, René, Helias,
  Schaub, NeurIPS 2024, arXiv:2406.02269): in the limit of infinitely many features a GCN is a
  Gaussian process; "if the initial weights of the network have sufficiently large variance,
  GCNs do not oversmooth" (abstract).  Their finite-size networks (``bepping/non-oversmoothing-gcns``,
  ``src/GCN_methods/models.py``, class ``GCN``) draw

  .. math:: W^{l}_{ij} \sim \mathcal N\!\big(0, \sigma_w^2 / N_{l-1}\big),\qquad
            b^{l}_i \sim \mathcal N(0, \sigma_b^2)

  with ``N_{l-1}`` the layer's input width (fan-in); the transition to the non-oversmoothing
  phase lies at a graph-dependent ``sigma_w^2`` (their Cora scans: ``0.5 .. 2.5`` with an erf
  nonlinearity).  Options ``sigma_w2`` (default 4.0, twice He's ReLU value) and ``sigma_b2``
  (default 0).  Attention vectors keep their Xavier draw.

* ``g_init`` — "Reducing Oversmoothing through Informed Weight Initialization in GNNs" (Kelesis,
  Fotakis, Paliouras, arXiv:2410.23830): Kaiming's forward-variance argument through the graph
  propagation.  For ``h'_v = \sum_u c_{uv} W x_u`` with i.i.d. weights and ReLU inputs
  (``E[x^2] = Var(h) / 2``), ``Var(h'_v) = fan\_in \cdot Var(W) \cdot \tfrac12 Var(h) \sum_u c_{uv}^2``,
  so the variance is kept when

  .. math:: Var(W^l) = \frac{g^2}{fan\_in_l \cdot s_l},\qquad s_l = \operatorname{mean}_v \sum_{u \in \mathcal N(v)} c^{l\,2}_{uv}

  with gain ``g^2 = 2`` (ReLU) and ``c^l`` layer ``l``'s propagation coefficients on the task's
  graph (GCN's ``1 / sqrt(d_u d_v)``; an attention layer's ``alpha`` at its current weights).
  **Source:** the paper's text beyond its abstract could not be read here, so this is the zoo's
  derivation of the abstract's description ("we generalize the ideas of Kaiming initialization
  to GNNs ... simplify our analysis to the case of the GCN"), not the paper's printed equation
  (``docs/inits.md``).  It needs the graph: it runs at the model's first forward
  (:mod:`zoo.inits.deferred`), one layer at a time, each ``s_l`` measured after the layers below
  it are set.

Both draw every feature matrix of ``LayerProtocol.outgoing_params()`` (:func:`zoo.symmetry.feature_matrices`);
biases (``bias_params``: ``N(0, sigma_b2)`` for ``large_variance``), attention vectors and linear
skips follow the Xavier base (zero biases and skips).
"""
from __future__ import annotations

import math
from typing import Any, List

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

from zoo.inits._registry import register_init
from zoo.inits.xavier import xavier
from zoo.inits.deferred import at_first_forward
from zoo.symmetry import bias_params, feature_matrices


def scatter_sum(values: Tensor, index: Tensor, num_nodes: int) -> Tensor:
    """``out[v] = sum of values[e]`` over the edges ``e`` with ``index[e] = v`` (an init runs once per
    model: plain ``index_add_``, not the training path's kernels)."""
    return values.new_zeros((num_nodes, *values.shape[1:])).index_add_(0, index, values)


def layer_protocol_reasons(model: nn.Module, **_: Any) -> List[str]:
    """Why ``model`` has no per-layer feature matrices to draw (empty: it has them)."""
    layers = getattr(model, "layers", None)
    if layers is None or not all(callable(getattr(layer, "outgoing_params", None)) for layer in layers):
        return [f"{type(model).__name__} does not give its layers' feature matrices through LayerProtocol "
                "(zoo.nn.base.LayerProtocol.outgoing_params); use xavier or the model's own init"]
    return []


def _positive(name: str, value: Any, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {value!r}")
    return float(value)


def normal_fan_in_(w: Tensor, variance_times_fan_in: float) -> None:
    """``w ~ N(0, v / fan_in)`` in place (``fan_in``: the columns of the ``(out, in)`` matrix)."""
    with torch.no_grad():
        w.normal_(0.0, math.sqrt(variance_times_fan_in / w.shape[1]))


@register_init("large_variance", aliases=("epping2024", "non_oversmoothing", "gp_large_variance"),
               check=layer_protocol_reasons)
def large_variance(model: nn.Module, sigma_w2: float = 4.0, sigma_b2: float = 0.0) -> None:
    """Large initial variance (Epping et al., NeurIPS 2024): ``W ~ N(0, sigma_w2 / fan_in)``, ``b ~ N(0, sigma_b2)``
    (module docstring)."""
    sigma_w2, sigma_b2 = _positive("sigma_w2", sigma_w2), _positive("sigma_b2", sigma_b2, allow_zero=True)
    if layer_protocol_reasons(model):
        raise TypeError(layer_protocol_reasons(model)[0])
    xavier(model)
    for layer in model.layers:
        for w in feature_matrices(layer):
            if not isinstance(w, UninitializedParameter):
                normal_fan_in_(w, sigma_w2)
        if sigma_b2 > 0:
            for b in bias_params(layer):
                if not isinstance(b, UninitializedParameter):
                    with torch.no_grad():
                        b.normal_(0.0, math.sqrt(sigma_b2))


def propagation_energy(edge_index: Tensor, alpha: Tensor, num_nodes: int) -> float:
    """``s = mean_v sum_u alpha_uv^2`` over nodes with incoming edges, averaged over heads."""
    squares = scatter_sum(alpha.detach().double().pow(2), edge_index[1], num_nodes)  # (N, heads)
    has_in = scatter_sum(torch.ones_like(alpha[:, :1], dtype=torch.float64), edge_index[1], num_nodes)[:, 0] > 0
    return float(squares[has_in].mean()) if bool(has_in.any()) else 1.0


def g_init_layers_(model: nn.Module, graph: Any, x: Tensor, gain2: float = 2.0) -> List[float]:
    """Set each layer's feature matrices to ``N(0, gain2 / (fan_in s_l))``, bottom-up; returns the ``s_l``."""
    energies = []
    # attention coefficients move with the weights below them: re-measure per layer; fixed ones (GCN) once
    attends = any(len(list(layer.attention_params())) for layer in model.layers)
    records = None
    for index, layer in enumerate(model.layers):
        if records is None or attends:
            with torch.no_grad():
                _, records = model(graph, x, return_attention=True)
        rec = records[index]
        s = propagation_energy(rec.edge_index, rec.alpha, x.size(0))
        energies.append(s)
        for w in feature_matrices(layer):
            if not isinstance(w, UninitializedParameter):
                normal_fan_in_(w, gain2 / s)
    return energies


@register_init("g_init", aliases=("ginit", "kelesis2024"), check=layer_protocol_reasons)
def g_init(model: nn.Module, gain2: float = 2.0) -> None:
    """G-Init (Kelesis et al. 2024; the zoo's reading of the abstract): ``W ~ N(0, 2 / (fan_in s_l))``, Kaiming
    through the propagation, ``s_l`` measured on the graph of the model's first forward (module docstring)."""
    gain2 = _positive("gain2", gain2)
    if layer_protocol_reasons(model):
        raise TypeError(layer_protocol_reasons(model)[0])
    xavier(model)
    at_first_forward(model, lambda m, graph, x: g_init_layers_(m, graph, x, gain2))
