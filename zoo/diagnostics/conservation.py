r"""Conservation-law and trainability diagnostics (balance paper, §2, §3 and §7).

* :func:`balance` — degree of balancedness per hidden neuron (Eq. 5, generalised):
  ``c_i^l = ||theta_in^l[i]||^2 - ||a^l[i]||^2 - ||theta_out^{l+1}[:, i]||^2``.
* :func:`gradient_identity` — after ``loss.backward()``, per hidden neuron (Eq. 7, generalised):
  ``delta_i^l = <theta_in, grad theta_in> - <a, grad a> - <theta_out, grad theta_out>``.
  Theorem 2.2 makes this an *identity of the gradient*: zero to rounding error at any parameters
  when the activation is positively homogeneous; measurably non-zero with ELU.
* :func:`relative_grad_norms` — per layer ``||grad W||_F / ||W||_F`` and ``||grad a|| / ||a||`` (§7).
* :func:`parameter_change` — per layer, the fraction of feature weights with relative change
  and of attention weights with absolute change above the figure's threshold (Figs. 3a, 4a:
  ``FIGURE_THRESHOLDS``; ``attention_threshold=0`` counts any change, as Figs. 8 and 11).
* :class:`ConservationRecorder` — a training callback recording these every ``every`` epochs;
  plot with :func:`plot_relative_grad_norms` and :func:`plot_change_fractions`.

Incoming / attention / outgoing parameters are those of :mod:`zoo.symmetry` (the layers'
own description of the symmetry): all of ``W_s``, ``W_t``, a separate update matrix, every head,
linear skips, and biases that rescale with their neuron (output bias of a concatenated hidden
layer, GATv2 attention bias).  Note that ``W_t^{l+1}[:, i]`` is *outgoing*, unlike Theorem 6.3 as
printed: the tests show ``delta != 0`` when it is left out.  GATDB/GATNB score biases ``xi`` do
not enter (GAT v1 scores ``a_s[i] (W h_u)[i]`` are invariant under the rescaling).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Union

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

from zoo.diagnostics.plots_training import plot_change_fractions, plot_relative_grad_norms
from zoo.symmetry import (attention_grad_dots, attention_sq_norms, incoming_grad_dots, incoming_sq_norms, layer_width,
                          outgoing_grad_dots, outgoing_sq_norms, rescale_groups)

__all__ = [
    "balance", "gradient_identity", "relative_grad_norms", "snapshot", "parameter_change", "FIGURE_THRESHOLDS",
    "ConservationRecorder", "plot_relative_grad_norms", "plot_change_fractions",
]

Snapshot = List[Dict[str, Tensor]]


def balance(model: nn.Module) -> List[Tensor]:
    """Degree of balancedness ``c`` (Eq. 5): one float64 tensor ``(n_l,)`` per hidden layer (``L - 1`` of them).

    ``c = 0`` everywhere after a balanced init; gradient flow keeps every entry constant.
    """
    groups = rescale_groups(model)
    out = []
    for index in range(len(groups) - 1):
        n = layer_width(model, index)
        out.append(incoming_sq_norms(groups[index], n) - attention_sq_norms(groups[index], n)
                   - outgoing_sq_norms(groups[index + 1], n))
    return out


def _require_gradients(model: nn.Module, what: str) -> None:
    if not any(p.grad is not None for p in model.parameters() if not isinstance(p, UninitializedParameter)):
        raise RuntimeError(f"{what} needs gradients: call loss.backward() first")


def gradient_identity(model: nn.Module) -> List[Tensor]:
    """``delta`` of Eq. (7) per hidden neuron, from the ``.grad`` of the last backward pass.

    One float64 tensor ``(n_l,)`` per hidden layer.  Zero up to rounding for positively
    homogeneous activations (Theorem 2.2/6.3/6.4); parameters without a gradient count as zero.
    """
    groups = rescale_groups(model)
    _require_gradients(model, "gradient_identity")
    out = []
    for index in range(len(groups) - 1):
        n = layer_width(model, index)
        out.append(incoming_grad_dots(groups[index], n) - attention_grad_dots(groups[index], n)
                   - outgoing_grad_dots(groups[index + 1], n))
    return out


def _norm(params: Sequence[Tensor], grad: bool) -> float:
    total = 0.0
    for p in params:
        t = p.grad if grad else p
        if t is not None:
            total += float(t.detach().double().pow(2).sum())
    return math.sqrt(total)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else float("nan")


def relative_grad_norms(model: nn.Module) -> List[Dict[str, float]]:
    """Per layer ``{"features": ||grad W||_F / ||W||_F, "attention": ||grad a|| / ||a||}`` (§7).

    ``W`` are the layer's feature matrices together (``W_s``, ``W_t``, update), ``a`` its attention
    parameters.  A ratio with a zero denominator (``a = 0`` right after a balanced init, or GCN's
    absent attention) is ``nan``.  Before any ``backward()`` there is nothing to measure: a
    ``RuntimeError`` (not a row of zeros that reads like a vanished gradient).
    """
    _require_gradients(model, "relative_grad_norms")
    out = []
    for layer in model.layers:
        feats = list(layer.outgoing_params())
        atts = [p for p in layer.attention_params() if not isinstance(p, UninitializedParameter)]
        out.append({"features": _ratio(_norm(feats, True), _norm(feats, False)),
                    "attention": _ratio(_norm(atts, True), _norm(atts, False))})
    return out


def snapshot(model: nn.Module) -> Snapshot:
    """Per layer ``{"features": flat copy of W, "attention": flat copy of a}``, for :func:`parameter_change`."""
    out = []
    for layer in model.layers:
        feats = [p.detach().flatten() for p in layer.outgoing_params()]
        atts = [p.detach().flatten() for p in layer.attention_params()]
        out.append({"features": torch.cat(feats).clone() if feats else torch.empty(0),
                    "attention": torch.cat(atts).clone() if atts else torch.empty(0)})
    return out


#: The change thresholds of the balance paper's figures: Fig. 3a (L = 5) "relative change > 0.05",
#: Fig. 4a (L = 10) "relative change > 0.5"; Figs. 8/11 count any change (threshold 0).
FIGURE_THRESHOLDS = {"fig3a": 0.05, "fig4a": 0.5, "fig8": 0.0}


def parameter_change(initial: Union[nn.Module, Snapshot], final: Union[nn.Module, Snapshot],
                     threshold: float = 0.05, min_magnitude: float = 1e-4,
                     attention_threshold: Optional[float] = None) -> List[Dict[str, float]]:
    """Per layer, the fraction of parameters that moved between ``initial`` and ``final`` (models or snapshots).

    * ``"features"``: among feature weights with ``|w*| >= min_magnitude`` (significant ones, §3),
      the fraction with relative change ``|(w* - w0) / w*| > threshold``;
    * ``"attention"``: the fraction of attention weights with absolute change
      ``|a* - a0| > attention_threshold`` (absolute, since balanced inits start at ``a = 0``, §7;
      default: ``threshold``, as Figs. 3a/4a apply one threshold to both; ``0``: any change);

    plus ``"features_count"`` / ``"attention_count"`` (how many were considered).  A fraction over
    no parameters is ``nan``.
    """
    att_threshold = threshold if attention_threshold is None else attention_threshold
    a = snapshot(initial) if isinstance(initial, nn.Module) else initial
    b = snapshot(final) if isinstance(final, nn.Module) else final
    if len(a) != len(b):
        raise ValueError(f"initial has {len(a)} layers but final has {len(b)}; compare two states of one model")
    out = []
    for index, (x, y) in enumerate(zip(a, b)):
        for key in ("features", "attention"):
            if x[key].shape != y[key].shape:
                raise ValueError(f"layer {index}: {key} shapes differ ({tuple(x[key].shape)} vs {tuple(y[key].shape)})")
        w0, w1 = x["features"].double(), y["features"].double().to(x["features"].device)
        significant = w1.abs() >= min_magnitude
        rel = ((w1 - w0) / w1.where(significant, torch.ones_like(w1))).abs()
        changed_w = (rel > threshold) & significant
        a0, a1 = x["attention"], y["attention"].to(x["attention"].device)
        n_sig, n_att = int(significant.sum()), a0.numel()
        changed_a = (a1.double() - a0.double()).abs() > att_threshold
        out.append({
            "features": _ratio(float(changed_w.sum()), n_sig),
            "attention": _ratio(float(changed_a.sum()), n_att),
            "features_count": n_sig, "attention_count": n_att,
        })
    return out


class ConservationRecorder:
    """Training callback: every ``every`` epochs, after ``loss.backward()``, record the diagnostics
    (in your own loop, as below, or as a ``zoo.fit`` callback: ``callbacks=[ConservationRecorder()]``).

    Example::

        rec = ConservationRecorder(model, every=25)
        for epoch in range(epochs):
            opt.zero_grad(); loss = criterion(model(g, x)[mask], y[mask]); loss.backward()
            rec(epoch, loss=loss.item())
            opt.step()
        rec.series("features")            # (epochs, array (T, L)) of relative gradient norms
        plot_relative_grad_norms(rec)

    Each record holds ``epoch``, per-layer ``features`` / ``attention`` relative gradient norms,
    ``max_abs_c`` and ``max_abs_delta`` per hidden layer (when the model describes its symmetry),
    and any extra keyword values (``loss``, ``val_acc``...).
    """

    def __init__(self, model: Optional[nn.Module] = None, every: int = 10, conservation: bool = True,
                 replica: int = 0) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.model, self.every, self.conservation, self.replica = model, every, conservation, replica
        self.history: List[Dict[str, Any]] = []

    def on_epoch_end(self, state: Any) -> None:
        """As a ``zoo.fit`` callback (``ConservationRecorder(every=25)``, no model): record replica
        ``replica`` of the fit every ``every`` epochs, with its metrics (``train``, ``val_loss``...).
        The last state has no gradient (no step follows it) and is not recorded."""
        if state.grads is None or state.epoch % self.every:
            return
        self.model = state.replica(self.replica)
        self(state.epoch, **{k: float(v[self.replica]) for k, v in state.metrics.items()})

    def __call__(self, epoch: int, **extra: Any) -> Optional[Dict[str, Any]]:
        if epoch % self.every:
            return None
        if self.model is None:
            raise ValueError("ConservationRecorder() without a model is a zoo.fit callback; to call it in your own "
                             "loop, give it the model: ConservationRecorder(model, every=...)")
        norms = relative_grad_norms(self.model)
        record: Dict[str, Any] = {
            "epoch": int(epoch),
            "features": [r["features"] for r in norms],
            "attention": [r["attention"] for r in norms],
            **extra,
        }
        if self.conservation:
            record["max_abs_c"] = [float(c.abs().max()) if c.numel() else 0.0 for c in balance(self.model)]
            record["max_abs_delta"] = [float(d.abs().max()) if d.numel() else 0.0
                                       for d in gradient_identity(self.model)]
        self.history.append(record)
        return record

    def series(self, key: str):
        """``(epochs, values)``: values a ``(T, L)`` array for per-layer keys, ``(T,)`` for scalars."""
        import numpy as np

        if not self.history:
            raise ValueError("nothing recorded yet: call the recorder after loss.backward() during training")
        if key not in self.history[0]:
            raise KeyError(f"no {key!r} recorded; recorded keys: {sorted(self.history[0])}")
        epochs = np.array([r["epoch"] for r in self.history])
        return epochs, np.array([r[key] for r in self.history], dtype=float)
