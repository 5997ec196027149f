"""The rescaling symmetry behind the balance paper's conservation law, per neuron, as the layers
describe it through :class:`zoo.nn.base.LayerProtocol` (``incoming_params``, ``attention_params``,
``outgoing_params``, and the optional ``bias_params`` / ``target_params``).  The balanced inits
(:mod:`zoo.inits`), dynamic rescaling (:mod:`zoo.rescale`) and the conservation diagnostics
(:mod:`zoo.diagnostics.conservation`) all read the model through this module, never a family's
attributes.

For a hidden neuron ``i`` of layer ``l`` (``l = 0 .. L-2``, 0-based) the symmetry scales

* its **incoming** parameters by ``lambda``: row ``i`` of every ``incoming_params()`` tensor of
  layer ``l`` (``W_s``, ``W_t``, a separate update matrix, the linear skip ``R^l``, the output
  bias of a concatenated layer, GATv2's attention bias),
* its **attention** parameters by ``1/lambda``: entry ``i`` of layer ``l``'s ``attention_params()``,
* its **outgoing** parameters by ``1/lambda``: column ``i`` of every ``outgoing_params()`` matrix
  of layer ``l + 1`` (again ``W_s``, ``W_t``, the update matrix and the skip ``R^{l+1}``).

This generalises Theorem 2.2 (shared weights), 6.3 (unshared) and 6.4 (heads): a stacked
``(heads * channels, in_dim)`` matrix holds every head, so its column ``i`` is the paper's sum
over heads of ``W_k^{l+1}[:, i]``.  Unlike Theorem 6.3 as printed, ``W_t^{l+1}[:, i]`` is on the
outgoing side: ``h^l[i]`` enters the next layer's score through ``W_t^{l+1} h_v`` too, and the
conservation tests show the gradient identity fails without it.

Besides the symmetry, an init needs two more roles, which a layer gives by the optional protocol
methods (none: no such parameters): ``bias_params()``, every additive bias (output biases, attention
biases, score biases such as GATDB's ``xi``), which an init that starts the attention at zero starts
at zero too; ``target_params()``, the feature matrices that read only the target node (unshared
``W_t``), which the balanced inits may set to zero (``unshared="zero_target"``).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

Group = Dict[str, List[Tensor]]


def rescale_groups(model: nn.Module) -> List[Group]:
    """``model.rescale_groups()``, with a clear error for models that do not describe their symmetry."""
    fn = getattr(model, "rescale_groups", None)
    if fn is None:
        raise TypeError(
            f"{type(model).__name__} does not describe its rescaling symmetry: conservation-law tools need a "
            "zoo DeepGNN (or any module with rescale_groups() -> [{'incoming', 'attention', 'outgoing'}])"
        )
    return fn()


def layer_width(model: nn.Module, index: int) -> int:
    """Number of output neurons of layer ``index`` (``heads * channels`` if concatenated)."""
    layer = model.layers[index]
    return layer.heads * layer.channels if layer.concat else layer.channels


def _materialised(params: Sequence[Tensor]) -> List[Tensor]:
    return [p for p in params if not isinstance(p, UninitializedParameter)]


def _per_neuron(group: Group, kind: str, n: int, by: str, with_grad: bool) -> Tensor:
    """``sum_p`` of ``p * p`` (or ``p * grad p``) reduced to one float64 value per neuron.

    ``by="row"``: ``p`` viewed as ``(n, -1)``, row ``i`` being everything neuron ``i`` owns in ``p``
    (weight rows, ``(heads, channels)`` vectors flattened); ``by="column"``: column ``i`` of a matrix.
    Parameters without a gradient (``with_grad``) or not yet materialised contribute zero.
    """
    out: Optional[Tensor] = None
    for p in _materialised(group[kind]):
        other = p.grad if with_grad else p
        if other is None:
            continue
        prod = p.detach().double() * other.detach().double()
        value = prod.reshape(n, -1).sum(1) if by == "row" else prod.sum(0)
        out = value if out is None else out + value
    if out is None:  # e.g. GCN's attention: zeros on the group's device
        device = next((p.device for ps in group.values() for p in _materialised(ps)), None)
        out = torch.zeros(n, dtype=torch.float64, device=device)
    return out


def incoming_sq_norms(group: Group, n: int) -> Tensor:
    """``sum_p ||p[i, ...]||^2`` over the incoming parameters, per neuron (``(n,)``)."""
    return _per_neuron(group, "incoming", n, "row", False)


def attention_sq_norms(group: Group, n: int) -> Tensor:
    """``sum_p p.flatten()[i]^2`` over the attention parameters, per neuron (zero for GCN)."""
    return _per_neuron(group, "attention", n, "row", False)


def outgoing_sq_norms(group: Group, n: int) -> Tensor:
    """``sum_p ||p[:, i]||^2`` over the (next layer's) outgoing matrices, per input neuron ``i``."""
    return _per_neuron(group, "outgoing", n, "column", False)


def incoming_grad_dots(group: Group, n: int) -> Tensor:
    """``<theta_in[i], grad theta_in[i]>`` per neuron."""
    return _per_neuron(group, "incoming", n, "row", True)


def attention_grad_dots(group: Group, n: int) -> Tensor:
    """``<a[i], grad a[i]>`` per neuron."""
    return _per_neuron(group, "attention", n, "row", True)


def outgoing_grad_dots(group: Group, n: int) -> Tensor:
    """``<theta_out[:, i], grad theta_out[:, i]>`` per input neuron ``i``."""
    return _per_neuron(group, "outgoing", n, "column", True)


def feature_matrices(layer: nn.Module) -> List[Tensor]:
    """The layer's feature-transformation matrices (``W_s``, ``W_t``, update): its outgoing parameters."""
    return list(layer.outgoing_params())


def bias_params(layer: nn.Module) -> List[Tensor]:
    """The layer's additive biases (``LayerProtocol.bias_params``; none if it does not say)."""
    method = getattr(layer, "bias_params", None)
    return list(method()) if callable(method) else []


def target_params(layer: nn.Module) -> List[Tensor]:
    """The layer's target-only feature matrices (``LayerProtocol.target_params``; none if it does not say)."""
    method = getattr(layer, "target_params", None)
    return list(method()) if callable(method) else []


def non_matrix_params(layer: nn.Module) -> List[Tensor]:
    """Parameters that zero-attention inits set to zero: attention parameters, the incoming
    parameters that are not feature matrices (biases that rescale with their neuron, edge terms) and
    every bias (when materialised)."""
    matrices = {id(p) for p in feature_matrices(layer)}
    found: List[Tensor] = []
    seen = set()
    for p in [*layer.attention_params(), *layer.incoming_params(), *bias_params(layer)]:
        if id(p) in matrices or id(p) in seen or isinstance(p, UninitializedParameter):
            continue
        seen.add(id(p))
        found.append(p)
    return found


def conservation_violations(model: nn.Module) -> List[str]:
    """Why the conservation law does not hold for ``model`` (``DeepGNN.conservation_law_violations``,
    else a family-level ``conservation_law_exception`` string); empty if it holds."""
    fn = getattr(model, "conservation_law_violations", None)
    if fn is not None:
        return list(fn())
    reason = getattr(model, "conservation_law_exception", None)
    return [reason] if reason else []


def check_group_shapes(model: nn.Module, groups: Optional[List[Group]] = None) -> None:
    """Fail early, naming the layer, if a layer's symmetry description does not fit its width."""
    groups = rescale_groups(model) if groups is None else groups
    for index in range(len(groups) - 1):
        n = layer_width(model, index)
        for kind, source in (("incoming", groups[index]), ("attention", groups[index]),
                             ("outgoing", groups[index + 1])):
            for p in _materialised(source[kind]):
                ok = p.dim() == 2 and p.shape[1] == n if kind == "outgoing" else p.numel() % n == 0
                if not ok:
                    raise ValueError(
                        f"layer {index}: {kind} parameter of shape {tuple(p.shape)} does not index the layer's "
                        f"{n} output neurons; check {type(model.layers[index]).__name__}.{kind}_params()"
                    )
