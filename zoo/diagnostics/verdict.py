"""The diagnose page's verdict: one paragraph computed from the recorded numbers (numpy only).

Input: :meth:`LayerRecorder.arrays` (keys ``(T, R, L)``, metrics ``(T, R)``) plus
``best_epoch`` / ``final`` per replica (``zoo.fit``'s :class:`History`).  The rules, per replica:

* **vanishing gradient**: at the first recorded state, the layers whose relative gradient norm
  ``||grad W|| / ||W||`` is below ``VANISHING`` (1e-3) of the largest layer's (the same for the
  attention parameters ``a``);
* **tiny gradient**: every layer's relative gradient below ``TINY`` (1e-3);
* **frozen layers**: layers whose weights moved less than ``FROZEN`` (1 %) of their norm by the end;
* **learning**: the selected epoch's training metric against the initial one;
* **oversmoothing**: the last layer's Laplacian energy below ``COLLAPSE`` (1e-3) of the first's;
* **uniform attention**: mean normalised attention entropy above 0.99 at the end (models that learn
  attention parameters only: a GCN's fixed neighbour weights are not attention);
* **conservation**: ``max |delta|`` (Eq. 7) tiny relative to the gradient products, and
  ``c = 0`` at initialisation (a balanced init).

A replica is called *untrainable at this init* when it has vanishing or tiny gradients and its
training metric gained less than 0.1; *trains* when the gain is at least 0.1.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

__all__ = ["verdict", "replica_findings", "VANISHING", "TINY", "FROZEN", "COLLAPSE"]

VANISHING = 1e-3
TINY = 1e-3
FROZEN = 0.01
COLLAPSE = 1e-3
_SUPER = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(x: float) -> str:
    """``10⁻⁶`` for 1.3e-6 (the exponent rounded down)."""
    if not math.isfinite(x) or x <= 0:
        return "0"
    return "10" + str(int(math.floor(math.log10(x)))).translate(_SUPER)


def _span(layers: Sequence[int]) -> str:
    """``1–3`` for [1, 2, 3], ``1, 4`` otherwise (1-based layers)."""
    if not layers:
        return ""
    if list(layers) == list(range(layers[0], layers[-1] + 1)) and len(layers) > 1:
        return f"{layers[0]}–{layers[-1]}"
    return ", ".join(map(str, layers))


def _layers(layers: Sequence[int]) -> str:
    return f"layer{'s' if len(layers) > 1 else ''} {_span(layers)}"


def _first_finite_row(a: np.ndarray) -> Optional[np.ndarray]:
    for row in a:
        if np.isfinite(row).any():
            return row
    return None


def _weak_layers(row: Optional[np.ndarray]) -> Dict[str, Any]:
    """Layers (1-based) whose value is below ``VANISHING`` of the largest layer's."""
    if row is None or not np.isfinite(row).any():
        return {}
    g = np.where(np.isfinite(row), row, np.nan)
    ref = int(np.nanargmax(g))
    if not g[ref] > 0:
        return {}
    ratio = g / g[ref]
    weak = [i + 1 for i, v in enumerate(ratio) if math.isfinite(v) and v < VANISHING]
    return {"layers": weak, "ratio": float(np.nanmax(ratio[[i - 1 for i in weak]])) if weak else None,
            "reference": ref + 1, "largest": float(g[ref])}


def replica_findings(data: Dict[str, Any], r: int) -> Dict[str, Any]:
    """The numbers behind the verdict for replica ``r`` (also shown on the page)."""
    out: Dict[str, Any] = {"label": data["labels"][r]}
    w = _weak_layers(_first_finite_row(data["grad_w"][:, r, :]))
    if w:
        out["vanishing"], out["vanishing_ratio"], out["reference_layer"] = w["layers"], w["ratio"], w["reference"]
        out["largest_grad"] = w["largest"]
    a = _weak_layers(_first_finite_row(data["grad_a"][:, r, :]))
    if a and a["layers"]:
        out["vanishing_a"], out["vanishing_a_ratio"], out["reference_layer_a"] = a["layers"], a["ratio"], a["reference"]
    change = data["change_w"][-1, r, :]
    out["frozen"] = [i + 1 for i, v in enumerate(change) if math.isfinite(v) and v < FROZEN]
    out["max_change"] = float(np.nanmax(change)) if np.isfinite(change).any() else None
    train = data.get("train")
    if train is not None:
        start = float(train[0, r])
        best = data.get("best_epoch", [None] * len(data["labels"]))[r]
        final = (data.get("final") or [{}] * len(data["labels"]))[r]
        end = final.get("train")
        if end is None and best is not None:
            idx = list(data["epochs"]).index(best) if best in list(data["epochs"]) else -1
            end = float(train[idx, r])
        out["train_start"], out["train_end"] = start, end
        out["test_end"] = final.get("test")
        out["best_epoch"] = best
    lap = _first_finite_row(data["laplacian"][:, r, :])
    if lap is not None and np.isfinite(lap[0]) and lap[0] > 0 and np.isfinite(lap[-1]):
        out["energy_ratio"] = float(lap[-1] / lap[0])
    ent = data["entropy"][-1, r, :]
    learns_attention = bool(np.isfinite(data["grad_a"][:, r, :]).any())  # GCN's fixed weights are no attention
    out["entropy_end"] = float(np.nanmean(ent)) if learns_attention and np.isfinite(ent).any() else None
    delta = _first_finite_row(data["delta"][:, r, :]) if data["delta"].shape[-1] else None
    out["max_delta"] = float(np.nanmax(delta)) if delta is not None and np.isfinite(delta).any() else None
    c0 = data["c"][0, r, :] if data["c"].shape[-1] else np.array([])
    out["max_c_init"] = float(np.nanmax(c0)) if c0.size and np.isfinite(c0).any() else None
    gain = (out.get("train_end") or 0.0) - out.get("train_start", 0.0) if "train_start" in out else None
    out["gain"] = gain
    out["tiny"] = out.get("largest_grad") is not None and out["largest_grad"] < TINY
    if (out.get("vanishing") or out["tiny"]) and gain is not None and gain < 0.1:
        out["status"] = "untrainable"
    elif gain is not None and gain >= 0.1:
        out["status"] = "trains"
    else:
        out["status"] = "stalls"
    return out


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.1f} %"


def _sentence(f: Dict[str, Any], num_layers: int, epochs: int) -> str:
    parts: List[str] = []
    name = f["label"]
    if f.get("vanishing"):
        parts.append(f"{_layers(f['vanishing'])} {'receive' if len(f['vanishing']) > 1 else 'receives'} "
                     f"{power_of_ten(f['vanishing_ratio'])} of layer {f['reference_layer']}'s relative gradient")
    elif f.get("tiny"):
        parts.append(f"every layer's relative gradient ‖∇W‖/‖W‖ is below {power_of_ten(f['largest_grad'] * 10)} "
                     f"(largest {f['largest_grad']:.1e}, layer {f['reference_layer']})")
    if f.get("vanishing_a"):
        parts.append(f"the attention parameters of {_layers(f['vanishing_a'])} receive "
                     f"{power_of_ten(f['vanishing_a_ratio'])} of layer {f['reference_layer_a']}'s relative gradient")
    if epochs == 0:  # weights looked at, not trained: no "stalls" or "untrainable" without a step
        head = f"{name} (not trained: epochs = 0): training metric {_pct(f.get('train_start'))}"
        if parts:
            head += f"; {'; '.join(parts)}"
    elif f["status"] == "untrainable":
        head = f"{name}: " + ("; ".join(parts) + ": " if parts else "") + "the model is untrainable at this init"
        head += f" (training metric {_pct(f.get('train_start'))} → {_pct(f.get('train_end'))} in {epochs} epochs)"
    elif f["status"] == "trains":
        head = (f"{name} trains: training metric {_pct(f.get('train_start'))} → {_pct(f.get('train_end'))}, "
                f"test {_pct(f.get('test_end'))} at epoch {f.get('best_epoch')}")
        if parts:
            head += f", although {parts[0]}"
    else:
        head = (f"{name} stalls: training metric {_pct(f.get('train_start'))} → {_pct(f.get('train_end'))} in "
                f"{epochs} epochs")
        if parts:
            head += f"; {parts[0]}"
    extra: List[str] = []
    frozen = (f.get("frozen") or []) if epochs else []  # nothing moves without a step
    if frozen and len(frozen) < num_layers:
        extra.append(f"{_layers(frozen)} moved by less than {FROZEN:.0%} of {'their' if len(frozen) > 1 else 'its'} norm")
    elif frozen:
        extra.append(f"no layer moved by {FROZEN:.0%} of its norm")
    ratio = f.get("energy_ratio")
    if ratio is not None and ratio < COLLAPSE:
        extra.append(f"the last layer's Laplacian energy is {power_of_ten(ratio)} of the first's (oversmoothing)")
    ent = f.get("entropy_end")
    if ent is not None and ent > 0.99:
        extra.append(f"attention stays uniform (entropy {ent:.3f} of its maximum)")
    if f.get("max_c_init") is not None and f["max_c_init"] < 1e-6:
        extra.append("it starts balanced (c = 0)")
    return head + ("; " + "; ".join(extra) if extra else "") + "."


def verdict(data: Dict[str, Any]) -> str:
    """A line per replica (configuration and init), then which one trains best."""
    R = len(data["labels"])
    num_layers = data["grad_w"].shape[-1]
    epochs = int(data["epochs"][-1]) if len(data["epochs"]) else 0
    findings = [replica_findings(data, r) for r in range(R)]
    text = "\n".join(_sentence(f, num_layers, epochs) for f in findings)
    scored = [(f.get("test_end"), f["label"]) for f in findings if f.get("test_end") is not None]
    if len(scored) > 1:
        scored.sort(reverse=True)
        (best, name), rest = scored[0], scored[1:]
        others = ", ".join(f"{n} {_pct(v)}" for v, n in rest)
        text += f"\nBest: {name} with {_pct(best)} test ({others})."
    grads = [(f["largest_grad"], f["label"]) for f in findings if f.get("largest_grad")]
    if len(grads) > 1:
        (lo, lo_name), (hi, hi_name) = min(grads), max(grads)
        if lo < 0.1 * hi:  # an order of magnitude or more apart
            text += (f" At the start, {lo_name}'s largest relative gradient is {power_of_ten(lo / hi)} of "
                     f"{hi_name}'s.")
    deltas = [f["max_delta"] for f in findings if f.get("max_delta") is not None]
    if deltas and max(deltas) < 1e-6:
        text += (f" The gradient identity holds (max |δ| = {max(deltas):.1e}): the activation is positively "
                 "homogeneous, so gradient flow conserves c.")
    return text
