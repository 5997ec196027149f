r"""Balanced initialisations (balance paper, Procedure 2.6 and Remark 2.7).

A network is *balanced* when, for every hidden neuron ``i`` of every hidden layer ``l``,

.. math::
    c_i^l = \|\theta^l_{\mathrm{in}}[i]\|^2 - \|a^l[i]\|^2 - \|\theta^{l+1}_{\mathrm{out}}[:, i]\|^2 = 0,

with the incoming / attention / outgoing parameters of :mod:`zoo.symmetry` (Eq. 5,
generalised to unshared weights, heads, GAT v1, GCN and linear skips).  Gradient flow conserves
every ``c_i^l`` (Corollary 2.3), so a balanced start stays balanced.

Procedure (``direction="forward"``):

1. attention vectors, biases (GATDB/GATNB's ``xi`` among them) and linear skips are set to zero;
2. rows of layer 1 are rescaled so that ``||theta_in^1[i]||^2 = beta_i``;
3. for ``l = 1 .. L-1`` the columns of layer ``l+1`` are rescaled so that
   ``||theta_out^{l+1}[:, i]||^2 = ||theta_in^l[i]||^2``.

Unshared weights (GATv2 ``share_weights=False``, Thm. 6.3): by default (``unshared="zero_target"``)
every target matrix ``W_t`` is set to zero and only ``W_s`` (and a separate update matrix) is
balanced, as the authors' code does.  ``W_t = 0`` keeps ``c = 0`` exactly (it adds nothing to
either side) and leaves ``W_s`` its full norm: rescaling ``W_s`` and ``W_t`` together
(``unshared="rescale_both"``, the zoo's earlier behaviour) splits ``beta`` between them, so each
hidden ``W_s`` shrinks by about ``1/sqrt(2)`` and the signal of a deep network dies (Cora, L=10,
SGD: loss stays at ``ln 7``).  See ``docs/differences.md``.

``direction="reverse"`` (Remark 2.7) fixes ``||theta_out^L[:, i]||^2 = beta_i`` and rescales rows
backwards.  Every matrix touching a neuron (``W_s``, ``W_t``, update matrix, every head's slice)
is scaled by the same factor, so directions drawn by the base init are kept.

``beta`` is a number, a tensor with one value per neuron, or a sampler ``beta(n) -> (n,)``
(e.g. ``lambda n: 1 + torch.rand(n)``).  Default ``2``: with an LL-orthogonal base the last
layer's columns have squared norm 2, and balance then propagates 2 back to layer 1 (§2).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, List, Union

import torch
from torch import Tensor, nn

from zoo._names import normalize_name, unknown_name_error
from zoo.inits._registry import register_init
from zoo.inits.orthogonal import identity_init_, identity_block, looks_linear_init_, orthonormal_block, \
    zero_non_matrix_params_
from zoo.inits.xavier import xavier_base
from zoo.symmetry import (Group, attention_sq_norms, check_group_shapes, conservation_violations, incoming_sq_norms,
                          layer_width, outgoing_sq_norms, rescale_groups, target_params)

Beta = Union[float, Tensor, Callable[[int], Tensor]]
DIRECTIONS = ("forward", "reverse")
UNSHARED = ("zero_target", "rescale_both")


class ConservationLawError(ValueError):
    """A balanced init was asked for a model whose conservation law is not established."""


def resolve_beta(beta: Beta, n: int) -> Tensor:
    """``beta`` as a float64 ``(n,)`` tensor of positive, finite values."""
    if callable(beta) and not isinstance(beta, Tensor):
        value = torch.as_tensor(beta(n), dtype=torch.float64)
    elif isinstance(beta, (int, float, Tensor)) and not isinstance(beta, bool):
        value = torch.as_tensor(beta, dtype=torch.float64)
    else:
        raise TypeError(f"beta must be a number, a tensor of per-neuron values or a sampler beta(n), got {beta!r}")
    value = value.detach().cpu().flatten()
    if value.numel() == 1:
        value = value.expand(n).clone()
    if value.numel() != n:
        raise ValueError(f"beta gives {value.numel()} values, but the balanced layer has {n} neurons")
    if not bool(torch.isfinite(value).all()) or bool((value <= 0).any()):
        raise ValueError(f"beta must be positive and finite (it is a squared norm); got min {float(value.min()):g}")
    return value


def check_law(model: nn.Module, init_name: str, strict: bool) -> None:
    """Raise (``strict``) or warn when the conservation law does not hold for ``model``."""
    reasons = conservation_violations(model)
    if not reasons:
        return
    msg = (
        f"init {init_name!r} balances the network so that the conservation law of the balance paper "
        f"(Thm. 2.2) keeps it balanced, but that law is not established for {type(model).__name__}: "
        + "; ".join(reasons)
    )
    if strict:
        raise ConservationLawError(msg + ". Use an unbalanced init (xavier, ll_orthogonal) or pass "
                                   "init_kwargs={'strict': False} to rescale anyway (c = 0 will not be conserved).")
    warnings.warn(msg + "; rescaling anyway (strict=False): c = 0 at init but not conserved.", stacklevel=3)


def law_reasons(model: nn.Module, strict: bool = True, **_: Any) -> List[str]:
    """The balanced inits' compatibility check: with ``strict`` (the default) a model whose
    conservation law does not hold is refused, for the reasons :func:`check_law` would raise."""
    reasons = list(conservation_violations(model)) if strict else []
    return reasons + ["init_kwargs = {strict = false} balances anyway, without the law"] if reasons else []


def _fill_dead(view: Tensor, norms: Tensor, target: Tensor) -> None:
    """Give all-zero rows (or columns, via a transposed view) that must carry norm a random direction."""
    dead = (norms == 0) & (target > 0)
    if bool(dead.any()):
        view[dead] = torch.randn(int(dead.sum()), view.shape[1], dtype=view.dtype, device=view.device)


def scale_rows_(group: Group, n: int, target: Tensor) -> None:
    """Rescale neuron rows of the incoming parameters so that their squared norms equal ``target``."""
    params = [p for p in group["incoming"] if not isinstance(p, nn.parameter.UninitializedParameter)]
    with torch.no_grad():
        norms = incoming_sq_norms(group, n)
        if bool(((norms == 0) & (target > 0)).any()):
            _fill_dead(params[0].view(n, -1), norms, target.to(norms.device))
            norms = incoming_sq_norms(group, n)
        factor = (target.to(norms.device) / norms.clamp_min(1e-300)).sqrt()
        for p in params:
            p.view(n, -1).mul_(factor.to(p.dtype).unsqueeze(1))


def scale_columns_(group: Group, n: int, target: Tensor) -> None:
    """Rescale column ``i`` of the outgoing matrices so that their squared norms equal ``target``."""
    params = [p for p in group["outgoing"] if not isinstance(p, nn.parameter.UninitializedParameter)]
    with torch.no_grad():
        norms = outgoing_sq_norms(group, n)
        if bool(((norms == 0) & (target > 0)).any()):
            _fill_dead(params[0].t(), norms, target.to(norms.device))
            norms = outgoing_sq_norms(group, n)
        factor = (target.to(norms.device) / norms.clamp_min(1e-300)).sqrt()
        for p in params:
            p.mul_(factor.to(p.dtype).unsqueeze(0))


def target_matrices(model: nn.Module) -> List[Tensor]:
    """The unshared target matrices ``W_t`` of every layer (their ``target_params``), if any."""
    return [w for layer in model.layers for w in target_params(layer)]


def _check_unshared(unshared: str) -> str:
    key = normalize_name(unshared)
    if key not in UNSHARED:
        raise unknown_name_error("unshared balancing scheme", unshared, UNSHARED)
    return key


def balance_(model: nn.Module, beta: Beta = 2.0, direction: str = "forward", unshared: str = "zero_target") -> None:
    """Zero attention/biases/skips and rescale feature matrices so that ``c = 0`` for every hidden
    neuron (``unshared``: how unshared ``W_s``/``W_t`` are treated, see the module docstring)."""
    direction = normalize_name(direction)
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS} (Remark 2.7), got {direction!r}")
    unshared = _check_unshared(unshared)
    zero_non_matrix_params_(model)
    if unshared == "zero_target":
        with torch.no_grad():
            for w in target_matrices(model):
                w.zero_()
    groups: List[Group] = rescale_groups(model)
    check_group_shapes(model, groups)
    num_layers = len(groups)
    if num_layers == 1:  # no hidden neuron: scale W^1's rows to beta (nothing to balance against)
        scale_rows_(groups[0], layer_width(model, 0), resolve_beta(beta, layer_width(model, 0)))
        return
    if direction == "forward":
        n = layer_width(model, 0)
        scale_rows_(groups[0], n, resolve_beta(beta, n))
        for index in range(num_layers - 1):
            n = layer_width(model, index)
            target = incoming_sq_norms(groups[index], n) - attention_sq_norms(groups[index], n)
            scale_columns_(groups[index + 1], n, target)
    else:
        n = layer_width(model, num_layers - 2)
        scale_columns_(groups[-1], n, resolve_beta(beta, n))
        for index in range(num_layers - 2, -1, -1):
            n = layer_width(model, index)
            target = outgoing_sq_norms(groups[index + 1], n) + attention_sq_norms(groups[index], n)
            scale_rows_(groups[index], n, target)


def _balanced(init_name: str, base: Callable[[nn.Module], None], model: nn.Module, beta: Beta,
              direction: str, strict: bool, unshared: str = "zero_target") -> None:
    check_law(model, init_name, strict)
    if normalize_name(direction) not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS} (Remark 2.7), got {direction!r}")
    _check_unshared(unshared)
    rescale_groups(model)  # fail on models without a symmetry description before touching weights
    base(model)
    balance_(model, beta, direction, unshared)


@register_init("balanced_xavier", aliases=("bal_x", "balx", "xavier_balanced"), check=law_reasons)
def balanced_xavier(model: nn.Module, beta: Beta = 2.0, direction: str = "forward", strict: bool = True,
                     unshared: str = "zero_target", distribution: str = "uniform") -> None:
    """Bal_X: Xavier feature matrices, zero attention, balanced (Procedure 2.6).

    ``distribution``: the Xavier draw before balancing, ``"uniform"`` (the text's Glorot & Bengio
    [19]; default) or ``"normal"`` (``xavier_normal_``, as the authors' code).  Balancing then sets
    the norms of ``W^1``'s rows and of the later layers' columns; the draw shapes their directions.
    """
    base = xavier_base(distribution)  # an unknown name fails here, before any weight is touched
    _balanced("balanced_xavier", base, model, beta, direction, strict, unshared)


@register_init("balanced_orthogonal", aliases=("bal_o", "balo", "ll_orthogonal_balanced", "llortho_bal"), check=law_reasons)
def balanced_orthogonal(model: nn.Module, beta: Beta = 2.0, direction: str = "forward", strict: bool = True,
                     unshared: str = "zero_target") -> None:
    """Bal_O: looks-linear orthogonal feature matrices, zero attention, balanced with ``beta = 2``."""
    _balanced("balanced_orthogonal", lambda m: looks_linear_init_(m, orthonormal_block), model, beta, direction,
              strict, unshared)


@register_init("balanced_identity", aliases=("identity_balanced", "bal_id"), check=law_reasons)
def balanced_identity(model: nn.Module, beta: Beta = 1.0, direction: str = "forward", strict: bool = True,
                     unshared: str = "zero_target") -> None:
    """Identity hidden layers, balanced with first/last-layer norms ``beta = 1`` (appendix, Fig. 9)."""
    _balanced("balanced_identity", identity_init_, model, beta, direction, strict, unshared)


@register_init("balanced_ll_identity", aliases=("ll_identity_balanced", "bal_llid"), check=law_reasons)
def balanced_ll_identity(model: nn.Module, beta: Beta = 2.0, direction: str = "forward", strict: bool = True,
                     unshared: str = "zero_target") -> None:
    """LLidentity hidden layers, balanced with first/last-layer norms ``beta = 2`` (appendix, Fig. 9)."""
    _balanced("balanced_ll_identity", lambda m: looks_linear_init_(m, identity_block, ends="xavier"), model, beta,
              direction, strict, unshared)
