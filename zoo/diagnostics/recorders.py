r"""Training callbacks that record per-layer diagnostics of every replica (``zoo.fit(callbacks=...)``).

* :class:`EnergyRecorder` — the nonlocal paper's per-layer energy trace (Fig. 1) every ``every``
  epochs.
* :class:`LayerRecorder` — everything the diagnose page (:mod:`zoo.diagnostics.page`) plots, per
  replica, layer and recorded epoch:

  ====================  ==========================================================================
  ``c``                 max |c| over the neurons of hidden layer l (balance, Eq. 5; L - 1 layers)
  ``delta``             max |delta| (gradient identity, Eq. 7; zero for homogeneous activations)
  ``grad_w``            ||grad W^l||_F / ||W^l||_F (relative gradient norm of the feature weights)
  ``grad_a``            ||grad a^l|| / ||a^l|| (attention parameters; nan where a = 0 or absent)
  ``change_w``          ||W^l_e - W^l_0||_F / ||W^l_0||_F (relative change since epoch 0)
  ``change_a``          ||a^l_e - a^l_0|| (absolute: balanced inits start at a = 0)
  ``entropy``           mean over nodes and heads of the attention entropy over a node's incoming
                        edges, divided by log(in-degree) (1 = uniform attention; nodes of degree 1
                        left out)
  ``self_attention``    mean over nodes and heads of alpha_vv (GATE paper; 1 = no aggregation)
  ``attention_change``  mean over edges and heads of |alpha_e - alpha_0|
  ``dirichlet``         Dirichlet energy of the layer's output X^l (:func:`dirichlet_energy`)
  ``laplacian``         Laplacian energy of X^l (:func:`laplacian_energy`)
  ``numerical_rank``    ||X^l||_F^2 / ||X^l||_2^2 (:func:`zoo.diagnostics.numerical_rank`)
  ``effective_rank``    exp of the entropy of X^l's normalised singular values
                        (:func:`zoo.diagnostics.effective_rank`)
  ====================  ==========================================================================

  and per replica and epoch the metrics ``train`` / ``val`` / ``test`` / ``train_loss`` / ``val_loss``.
  Gradient quantities of the last state (no step follows it) are nan.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

from zoo.diagnostics.attention import attention_entropy, self_attention
from zoo.diagnostics.conservation import balance, gradient_identity
from zoo._names import unknown_name_error
from zoo.diagnostics.oversmoothing import ENERGIES, _hooked_taps, energy_trace
from zoo.diagnostics.rank import RANKS
from zoo.diagnostics.schedule import GraphRecorder

__all__ = ["LayerRecorder", "EnergyRecorder", "layer_parameters", "LAYER_KEYS", "METRIC_KEYS"]

LAYER_KEYS = ("c", "delta", "grad_w", "grad_a", "change_w", "change_a", "entropy", "self_attention",
              "attention_change", "dirichlet", "laplacian", "numerical_rank", "effective_rank")
METRIC_KEYS = ("train", "val", "test", "train_loss", "val_loss")


def _flat(params: Sequence[Tensor]) -> Tensor:
    kept = [p.detach().flatten().double() for p in params if not isinstance(p, UninitializedParameter)]
    return torch.cat(kept) if kept else torch.empty(0, dtype=torch.float64)


_SCORE_NAMES = ("att", "query", "key")


def layer_parameters(layer: nn.Module) -> Tuple[List[Tensor], List[Tensor]]:
    """A layer's feature weights ``W`` and attention parameters ``a``: the layer's own description
    (``outgoing_params`` / ``attention_params``, the GAT family), else by name for other layers
    (transformer blocks): parameters of the attention scores (``att*``, ``*query*``, ``*key*``)
    are ``a``, every other matrix is ``W``."""
    if hasattr(layer, "outgoing_params") and hasattr(layer, "attention_params"):
        return list(layer.outgoing_params()), list(layer.attention_params())
    feats, atts = [], []
    for name, p in layer.named_parameters():
        leaf = name.rsplit(".", 2)
        if any(key in part for part in leaf[-2:] for key in _SCORE_NAMES):
            atts.append(p)
        elif p.dim() >= 2:
            feats.append(p)
    return feats, atts


def _norm(params: Sequence[Tensor], grad: bool) -> float:
    total = 0.0
    for p in params:
        t = p.grad if grad else p
        if t is not None and not isinstance(p, UninitializedParameter):
            total += float(t.detach().double().pow(2).sum())
    return math.sqrt(total)


def _relative_grads(model: nn.Module) -> Dict[str, List[float]]:
    """Per layer ``||grad W|| / ||W||`` and ``||grad a|| / ||a||`` (nan over nothing or a zero norm):
    :func:`zoo.diagnostics.relative_grad_norms`, for any layer (:func:`layer_parameters`)."""
    out: Dict[str, List[float]] = {"grad_w": [], "grad_a": []}
    for layer in model.layers:
        for key, group in zip(("grad_w", "grad_a"), layer_parameters(layer)):
            den = _norm(group, False)
            out[key].append(_norm(group, True) / den if den > 0 else math.nan)
    return out


def _weights(model: nn.Module) -> List[Dict[str, Tensor]]:
    """Per layer, flat float64 copies of the feature weights W and attention parameters a."""
    out = []
    for layer in model.layers:
        feats, atts = layer_parameters(layer)
        out.append({"w": _flat(feats).clone(), "a": _flat(atts).clone()})
    return out


class LayerRecorder:
    """Per-layer diagnostics of every replica, every ``every`` epochs (and always at epoch 0 and the
    last state).  ``energies=False`` / ``attention=False`` skip the forward pass they need (and
    ``conservation=False`` the c / delta sums).  Needs a transductive task (one graph): the
    energies and attention are read from a forward pass over it.

    After fitting, :meth:`arrays` gives ``{key: array (T, R, L)}`` plus ``epochs`` ``(T,)`` and the
    metrics ``(T, R)``; ``labels`` names the replicas.
    """

    def __init__(self, every: int = 1, energies: bool = True, attention: bool = True,
                 conservation: bool = True) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1, got {every!r}")
        self.every, self.energies, self.attention, self.conservation = every, energies, attention, conservation
        self.labels: List[str] = []
        self.epochs: List[int] = []
        self.records: List[Dict[str, List[List[float]]]] = []  # per epoch: key -> per replica, per layer
        self.metrics: List[Dict[str, List[float]]] = []
        self._initial: List[List[Dict[str, Tensor]]] = []
        self._initial_alpha: List[List[Tensor]] = []
        self._last_epoch: Optional[int] = None

    # ------------------------------------------------------------------ callback
    def on_epoch_end(self, state: Any) -> None:
        if state.epoch % self.every == 0 or state.epoch == 0:
            self._record(state)

    def on_fit_end(self, state: Any) -> None:
        if not self.epochs or self.epochs[-1] != state.epoch:
            self._record(state)

    def _record(self, state: Any) -> None:
        if state.inputs is None and (self.energies or self.attention):
            raise ValueError("LayerRecorder reads energies and attention from one graph: it needs a transductive task "
                             "(e.g. cora); pass LayerRecorder(energies=False, attention=False) for mini-batch tasks")
        first = not self.epochs
        if first:
            self.labels = list(state.labels)
        per_key: Dict[str, List[List[float]]] = {k: [] for k in LAYER_KEYS}
        for r in range(state.size):
            model = state.replica(r)
            for key, values in self._replica(model, state, r, first).items():
                per_key[key].append(values)
        self.records.append(per_key)
        self.epochs.append(int(state.epoch))
        self.metrics.append({k: [float(v) for v in state.metrics[k].tolist()] for k in METRIC_KEYS
                             if k in state.metrics})

    def _replica(self, model: nn.Module, state: Any, r: int, first: bool) -> Dict[str, List[float]]:
        L = len(model.layers)
        nan = [math.nan] * L
        out: Dict[str, List[float]] = {}
        has_grad = state.grads is not None
        if self.conservation and hasattr(model, "layers"):
            try:
                out["c"] = [float(c.abs().max()) if c.numel() else 0.0 for c in balance(model)]
                out["delta"] = ([float(d.abs().max()) if d.numel() else 0.0 for d in gradient_identity(model)]
                                if has_grad else [math.nan] * (L - 1))
            except (TypeError, NotImplementedError, AttributeError):  # a family without the rescaling symmetry
                out["c"], out["delta"] = [math.nan] * (L - 1), [math.nan] * (L - 1)
        else:
            out["c"], out["delta"] = [math.nan] * (L - 1), [math.nan] * (L - 1)
        if has_grad:
            out.update(_relative_grads(model))
        else:
            out["grad_w"], out["grad_a"] = list(nan), list(nan)
        now = _weights(model)
        if first:
            self._initial.append(now)
        init = self._initial[r]
        out["change_w"] = [float((b["w"] - a["w"]).norm() / a["w"].norm()) if a["w"].numel() and a["w"].norm() > 0
                           else math.nan for a, b in zip(init, now)]
        out["change_a"] = [float((b["a"] - a["a"]).norm()) if a["a"].numel() else math.nan for a, b in zip(init, now)]
        out.update(self._forward(model, state, r, first, L))
        return out

    def _forward(self, model: nn.Module, state: Any, r: int, first: bool, L: int) -> Dict[str, List[float]]:
        nan = [math.nan] * L
        result = {k: list(nan) for k in ("entropy", "self_attention", "attention_change", "dirichlet", "laplacian",
                                         *RANKS)}
        if not (self.energies or self.attention):
            return result
        graph, x = state.inputs[:2]  # (edge_index, x[, False, edge_attr])
        if getattr(model, "taps", None) is None:  # no layer outputs to read: energies stay nan
            with torch.no_grad():
                _, records = model(graph, x, return_attention=True)
            captured: Dict[int, Tensor] = {}
        else:
            with _hooked_taps(model) as captured, torch.no_grad():
                _, records = model(graph, x, return_attention=True)
        if self.energies and captured:
            reps = [captured[k] for k in sorted(captured)]
            for name in ("dirichlet", "laplacian"):
                result[name] = [float(ENERGIES[name](graph, rep.double())) for rep in reps]
            for name, fn in RANKS.items():
                result[name] = [fn(rep) for rep in reps]
        if self.attention and records:
            n = x.size(0)
            alphas = [rec.alpha.detach().double() for rec in records]
            if first:
                self._initial_alpha.append(alphas)
            start = self._initial_alpha[r]
            result["entropy"] = [attention_entropy(rec.edge_index, rec.alpha, n) for rec in records]
            result["self_attention"] = [self_attention(rec.edge_index, rec.alpha) for rec in records]
            result["attention_change"] = [float((a - a0).abs().mean()) if a.shape == a0.shape and a.numel() else math.nan
                                          for a, a0 in zip(alphas, start)]
        return result

    # ------------------------------------------------------------------ results
    def arrays(self) -> Dict[str, Any]:
        """``{"epochs": (T,), "labels": [R], key: (T, R, L_key) for LAYER_KEYS, metric: (T, R)}`` (numpy)."""
        import numpy as np

        if not self.epochs:
            raise ValueError("nothing recorded: pass the recorder to zoo.fit(callbacks=[...]) and train first")
        out: Dict[str, Any] = {"epochs": np.array(self.epochs), "labels": list(self.labels)}
        for key in LAYER_KEYS:
            out[key] = np.array([rec[key] for rec in self.records], dtype=float)
        for key in METRIC_KEYS:
            if key in self.metrics[0]:
                out[key] = np.array([m[key] for m in self.metrics], dtype=float)
        return out

    def to_dict(self) -> Dict[str, Any]:
        """The record as plain JSON values (nan -> None), e.g. to keep beside the page."""
        arrays = self.arrays()

        def clean(v: Any) -> Any:
            if isinstance(v, list):
                return [clean(x) for x in v]
            return None if isinstance(v, float) and not math.isfinite(v) else v

        return {k: (v if k == "labels" else clean(v.tolist())) for k, v in arrays.items()}


class EnergyRecorder(GraphRecorder):
    """The nonlocal paper's per-layer energy trace of every replica every ``every`` epochs:
    ``history`` is a list of ``{"epoch": e, "trace": [[E(X^1), ..., E(X^L)] per replica]}``."""

    reads = "trace energies over"

    def __init__(self, every: int = 10, energy: str = "laplacian") -> None:
        if energy not in ENERGIES:
            raise unknown_name_error("energy", energy, ENERGIES)
        super().__init__(every)
        self.energy = energy

    def on_epoch_end(self, state: Any) -> None:
        inputs = self.due(state)
        if inputs is None:
            return
        graph, x = inputs
        traces = [energy_trace(state.replica(r), graph, x, energy=self.energy).tolist() for r in range(state.size)]
        self.history.append({"epoch": int(state.epoch), "trace": traces})
