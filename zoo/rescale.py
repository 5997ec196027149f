r"""Dynamic rescaling (Mustafa & Burkholz, *Training GNNs in Balance by Dynamic Rescaling*,
NeurIPS 2024; code ``RelationalML/Dynamic_Rescaling_GAT``, ``Code/runRBexp.py``) as a training
callback: every ``every`` epochs, rescale each hidden neuron by the rescaling symmetry of
:class:`zoo.nn.base.LayerProtocol` so that the layers are in balance by a criterion.

For hidden neuron ``i`` of layer ``l`` the step multiplies its incoming parameters by
``lambda_i``, its attention parameters and the next layer's outgoing columns by
``1 / lambda_i`` (and the gradients by the inverse factors, which makes them the exact gradient
at the new point: the network function, hence the loss, does not change).  Criteria, with
``in`` / ``att`` / ``out`` the parameter groups of :mod:`zoo.symmetry`:

* ``relative_gradients`` (the code's ``sqRelGradNorms``, its default):
  :math:`\lambda_i = \big(\sum_{in} (g/w)^2 / (\sum_{out} (g/w)^2 + \sum_{att} (g/a)^2)\big)^{1/8}`,
  which equalises the squared relative gradients entering and leaving the neuron;
* ``weight_norms`` (``sqParamNorms``): :math:`\lambda_i = ((\|out\|^2 + \|a\|^2) / \|in\|^2)^{1/4}`,
  which makes the degree of balancedness ``c_i`` (balance paper Eq. 5) zero.

As in the code: ``iterations`` sweeps over the layers in order (each layer sees the previous
one's update), factors that are not finite become 1 and factors are clipped to ``clip``; the
optimiser's state is left as it is.  Where the code divides by a zero parameter (LLortho and
balanced inits start with ``a = 0``), the zoo leaves that entry out of the sum
(docs/differences.md).  Under ``zoo.fit`` every replica is rescaled with its own factors;
stopped replicas are left alone.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from zoo.symmetry import conservation_violations, layer_width, rescale_groups

__all__ = ["DynamicRescaling", "rescale_step_", "CRITERIA"]

CRITERIA = ("relative_gradients", "weight_norms")
Stacked = Dict[int, Tuple[Tensor, Optional[Tensor]]]  # id(parameter of the model) -> ((R, ...) value, grad)


def _sums(tensors: Sequence[Tuple[Tensor, Optional[Tensor]]], n: int, by: str, relative: bool) -> Tensor:
    """Per replica and neuron (``(R, n)``) the sum of ``w^2`` (or of ``(g / w)^2`` over ``w != 0``)."""
    total = None
    for value, grad in tensors:
        if relative:
            if grad is None:
                continue
            v, g = value.double(), grad.double()
            term = torch.where(v != 0, g / torch.where(v != 0, v, 1.0), 0.0).pow(2)
        else:
            term = value.double().pow(2)
        R = term.size(0)
        part = term.reshape(R, n, -1).sum(-1) if by == "row" else term.reshape(R, -1, n).sum(1)
        total = part if total is None else total + part
    return total


def _factors(groups: List[Dict[str, list]], stacked: Stacked, l: int, n: int, criterion: str,
             clip: Tuple[float, float]) -> Tensor:
    inc = [stacked[id(p)] for p in groups[l]["incoming"]]
    att = [stacked[id(p)] for p in groups[l]["attention"]]
    out = [stacked[id(p)] for p in groups[l + 1]["outgoing"]]
    relative = criterion == "relative_gradients"
    zero = torch.zeros(inc[0][0].size(0), n, dtype=torch.float64, device=inc[0][0].device)
    num = _sums(inc, n, "row", relative)
    den = (_sums(out, n, "column", relative) if out else zero) + (_sums(att, n, "row", relative) if att else zero)
    ratio = den / num if criterion == "weight_norms" else num / den
    lam = ratio.pow(0.25 if criterion == "weight_norms" else 0.125)
    lam = torch.where(torch.isfinite(lam) & (lam > 0), lam, torch.ones_like(lam))
    return lam.clamp(*clip)


def _scale(entry: Tuple[Tensor, Optional[Tensor]], lam: Tensor, by: str, power: int) -> None:
    """``value *= lam**power`` and ``grad *= lam**-power`` along the neuron axis, in place (by
    broadcasting, so any memory layout of the stacked tensors works)."""
    value, grad = entry
    R, n = lam.shape
    dims = value.shape[1:]
    if by == "row":  # the leading dims whose product is n index the neuron ((heads, channels) for a)
        k, size = 0, 1
        while size < n:
            size *= dims[k]
            k += 1
        f = lam.view(R, *dims[:k], *([1] * (len(dims) - k)))
    else:
        f = lam.view(R, *([1] * (len(dims) - 1)), n)
    f = f.pow(power).to(value.dtype)
    value.mul_(f)
    if grad is not None:
        grad.div_(f)


def rescale_step_(model: nn.Module, stacked: Stacked, criterion: str = "relative_gradients", iterations: int = 10,
                  clip: Tuple[float, float] = (1e-5, 2.0), active: Optional[Tensor] = None) -> List[Tensor]:
    """One dynamic-rescaling step on ``stacked`` (``id(p) -> ((R, ...) value, (R, ...) grad or None)``
    for every parameter ``p`` of ``model``'s symmetry groups), in place; returns the last sweep's
    factors per hidden layer (``(R, n_l)``).  ``active`` ``(R,)``: replicas to rescale."""
    groups = rescale_groups(model)
    last: List[Tensor] = []
    with torch.no_grad():
        for _ in range(iterations):
            last = []
            for l in range(len(groups) - 1):
                n = layer_width(model, l)
                lam = _factors(groups, stacked, l, n, criterion, clip)
                if active is not None:
                    lam = torch.where(active.view(-1, 1).to(lam.device), lam, torch.ones_like(lam))
                for p in groups[l]["incoming"]:
                    _scale(stacked[id(p)], lam, "row", 1)
                for p in groups[l]["attention"]:
                    _scale(stacked[id(p)], lam, "row", -1)
                for p in groups[l + 1]["outgoing"]:
                    _scale(stacked[id(p)], lam, "column", -1)
                last.append(lam)
    return last


class DynamicRescaling:
    """``zoo.fit(callbacks=[DynamicRescaling()])``: a rescaling step (:func:`rescale_step_`)
    after the evaluation of every ``every``-th state (epoch 0 included), before the step that
    state's gradient takes.  Defaults are the authors' (``InitExpSettingsRB.csv``: criterion
    ``sqRelGradNorms``, 10 iterations every 10 epochs, factors clipped to [1e-5, 2]).
    ``factors`` keeps the last sweep's factors of every rescaling, keyed by epoch."""

    def __init__(self, every: int = 10, criterion: str = "relative_gradients", iterations: int = 10,
                 clip: Tuple[float, float] = (1e-5, 2.0), keep_factors: bool = False) -> None:
        for name, v in (("every", every), ("iterations", iterations)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"DynamicRescaling: {name} must be an integer >= 1, got {v!r}")
        if criterion not in CRITERIA:
            raise ValueError(f"DynamicRescaling: criterion must be one of {', '.join(CRITERIA)}, got {criterion!r}")
        if not (0 < clip[0] <= 1 <= clip[1]):
            raise ValueError(f"DynamicRescaling: clip must be (low, high) with 0 < low <= 1 <= high, got {clip!r}")
        self.every, self.criterion, self.iterations, self.clip = every, criterion, iterations, tuple(clip)
        self.keep_factors = keep_factors
        self.factors: Dict[int, List[Any]] = {}

    def on_epoch_end(self, state: Any) -> None:
        if state.epoch % self.every:
            return
        model = state.base
        reasons = conservation_violations(model)
        if reasons:
            raise ValueError(f"DynamicRescaling needs the rescaling symmetry, which {type(model).__name__} lacks: "
                             f"{reasons[0]}")
        if self.criterion == "relative_gradients" and state.grads is None:
            return  # the last state (no step follows) or a mini-batch task: no gradient to balance
        own = dict(model.named_parameters())
        index = {id(own[name]): i for i, name in enumerate(state.names)}
        stacked = {pid: (state.params[i], None if state.grads is None else state.grads[i]) for pid, i in index.items()}
        lam = rescale_step_(model, stacked, self.criterion, self.iterations, self.clip, state.active)
        if self.keep_factors:
            self.factors[int(state.epoch)] = [f.cpu() for f in lam]

    def state_dict(self) -> Dict[str, Any]:
        """The kept factors (saved with a resumed group's loop state; the schedule is the epoch's)."""
        return {"factors": {epoch: list(f) for epoch, f in self.factors.items()}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.factors = {int(epoch): [t.cpu() for t in f] for epoch, f in state["factors"].items()}
