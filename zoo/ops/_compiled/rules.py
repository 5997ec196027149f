"""Fake (meta), autograd and vmap rules shared by the C++ and the Triton attention ops.

Each backend provides four ops with the same schemas (``gatv2_forward``, ``gatv2_backward``,
``gat_forward``, ``gat_backward``; see ``cpu/attention.cpp``; the C++ ones take two more,
defaulted arguments: ``replicas_outer``, and ``keep``, attention dropout's scaled keep mask per
edge and head, which a replica carries like its features).  Each forward returns ``(out, alpha,
saved)``, ``saved`` being what its backward takes after ``out``: the log-sum-exp of each destination's
scores ``(N, H)``, except the C++ ``gatv2_forward``'s, each edge's log alpha ``(E, H)`` (its backward then
needs no scores: ``register(..., gatv2_saves_per_edge=True)``).  Under ``torch.func.vmap`` there is one call for all
replicas, exact because every head of every replica is computed on its own:

* the C++ ops (``register(ns, replica_major=True)``) take the stacked tensors as they are,
  replicas first — no copy when the replica dimension is already the leading one, which is how
  the stacked models produce it — and return them replicas first;
* the Triton ops fold the replica dimension into the heads (``(N, R*H, ...)``, a copy).

Called directly under one vmap (:func:`direct_rules`), GATv2 with one tensor as x_src, x_dst and values
(shared weights) is one autograd node of that tensor (:func:`shared_gatv2_formula`), whose backward is
the C++ ``gatv2_backward_summed`` where the namespace has it (the three gradients' sum, in autograd's order).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor

from zoo.ops._direct import Formula, below_autograd, direct_op

#: crow, col, perm (CSR by destination), crow_s, col_s, perm_s (by source): the C++ ops' graph arguments;
#: the Triton ops take four more, the light / heavy degree buckets by destination and by source
GRAPH_ARGS = 6


def _fold(t: Optional[Tensor], dim: Optional[int], batch: int) -> Optional[Tensor]:
    """Replica dim to position 1, merged with the heads: ``(N|E, R, H, ...)`` -> ``(N|E, R*H, ...)``."""
    if t is None:
        return None
    t = t.movedim(dim, 1) if dim is not None else t.unsqueeze(1).expand(t.shape[0], batch, *t.shape[1:])
    return t.reshape(t.shape[0], -1, *t.shape[3:])


def _folds(ts: Sequence[Optional[Tensor]], dims: Sequence[Optional[int]], batch: int) -> Sequence[Optional[Tensor]]:
    """:func:`_fold` of each argument, with one copy per distinct tensor: GATv2 with shared weights passes
    one tensor as x_src, x_dst and values, which was copied three times per call (Amazon Computers' first
    layer: 17.6 MB each).  Each argument keeps a view of its own (as :func:`_firsts`), so the autograd graph
    has a node per argument as with a copy each.  The copy is made contiguous: with one head the fold's
    reshape merges replicas and heads as a strided view, which the op then copied once per argument."""
    copies: dict = {}
    out = []
    for t, d in zip(ts, dims):
        if t is None:
            out.append(None)
            continue
        key = (id(t), d)
        if key not in copies:
            copies[key] = _fold(t, d, batch).contiguous()
        out.append(copies[key].movedim(0, 0))
    return out


def _fold_att(att: Tensor, dim: Optional[int], batch: int) -> Tensor:
    """``(R, H, C)`` -> ``(R*H, C)`` (the replica is already the leading dim of a parameter)."""
    att = att.movedim(dim, 0) if dim is not None else att.expand(batch, *att.shape)
    return att.reshape(-1, att.shape[-1])


def _first(t: Optional[Tensor], dim: Optional[int], batch: int, merge: bool) -> Optional[Tensor]:
    """The replica dim first: a view (the op makes it contiguous, a no-op for stacked activations);
    ``merge``: into the replica dim the tensor already has (nested vmap; a copy)."""
    if t is None:
        return None
    t = t.movedim(dim, 0) if dim is not None else t.expand(batch, *t.shape)
    return t.flatten(0, 1) if merge else t


def _firsts(ts: Sequence[Optional[Tensor]], dims: Sequence[Optional[int]], batch: int,
            merge: bool) -> Sequence[Optional[Tensor]]:
    """:func:`_first` of each argument, with one contiguous copy of a tensor whose replica-first view
    is strided (the first layer's CSR product hands back ``(N, R, C)``): the op would copy each such
    argument itself, once per argument (GATv2 with shared weights passes one tensor three times)
    and again in its backward (the saved views).  Each argument keeps a view of its own, so the
    autograd graph, and the order in which the gradients of a tensor passed several times are
    summed, stay as without the copy."""
    copies: dict = {}
    out = []
    for t, d in zip(ts, dims):
        v = _first(t, d, batch, merge)
        if v is not None and not v.is_contiguous():
            key = (id(t), d)
            if key not in copies:
                copies[key] = v.contiguous()
            v = copies[key].movedim(0, 0)
        out.append(v)
    return out


#: How the C++ ops run R replicas (the same numbers every way: each head is computed on its own):
#: * all replicas' values fit this many bytes: one call, replicas first, all replicas per group
#:   of rows (Cornell);
#: * one replica's fit and all do not: one call, replicas first, replica by replica over the
#:   graph — the row gathers jump around the graph and one replica's rows stay in cache where all
#:   replicas' do not (Cora, 15 replicas x 64 channels);
#: * not even one replica's fit (PubMed, 8 heads x 8 channels: 5 MB per replica): replicas
#:   folded into the heads (a copy to ``(N, R*H, C)``), so that each edge reads all replicas'
#:   rows as one contiguous block instead of R scattered rows.
#: The measurements behind each case: docs/notes/performance.md, "Dispatch thresholds".
FOLD_MAX_BYTES = 2 << 20

#: Where one replica's values fit FOLD_MAX_BYTES and all do not, replicas are still folded into the
#: heads when one replica's row of values (heads x channels) is at most this many bytes: a narrow
#: row (an output layer of a few classes, one head) makes every edge's fixed work — the CSR slot,
#: the exponential, the scattered per-edge terms — the cost, and one pass over the edges for all
#: replicas pays it once instead of once per replica; the cache gained by going replica by replica
#: does not make up for that below a few cache lines (docs/notes/performance.md, "Dispatch thresholds").
FOLD_ROW_MAX_BYTES = 128


def _fold_fits(values: Tensor, dim: Optional[int], batch: int) -> bool:
    """Whether to run the replicas of ``values`` (the physical tensor; ``dim``: its replica dim)
    together, all per group of rows: always on a GPU (one launch over all replicas' heads is the
    parallelism); on the CPU unless one replica's values fit :data:`FOLD_MAX_BYTES` and all do not."""
    if values.device.type != "cpu":
        return True
    folded = values.numel() * values.element_size() * (1 if dim is not None else batch)
    return folded <= FOLD_MAX_BYTES or folded // batch > FOLD_MAX_BYTES


def _replica_bytes(values: Tensor, dim: Optional[int], batch: int) -> int:
    """Bytes of one replica's values (``values``: the physical tensor; ``dim``: its replica dim)."""
    return values.numel() * values.element_size() // (batch if dim is not None else 1)


def _row_bytes(values: Tensor, dim: Optional[int]) -> int:
    """Bytes of one node's row (heads x channels) of one replica's values (``values``: the physical
    ``(N, H, C)`` tensor with, where ``dim`` is not None, a replica dim at ``dim``)."""
    shape = list(values.shape)
    if dim is not None:
        del shape[dim]
    return shape[-2] * shape[-1] * values.element_size()


def _unfold(t: Tensor, batch: int) -> Tensor:
    return t.view(t.shape[0], batch, t.shape[1] // batch, *t.shape[2:])


def _shared_graph(dims: Sequence[Optional[int]]) -> None:
    if any(d is not None for d in dims):
        raise ValueError("compiled attention under vmap: the graph must be shared by all replicas "
                         "(vmap over parameters and features, not over edge indices)")


def _keep(args: Sequence[Any], dims: Sequence[Any], outer_at: int) -> Tuple[Optional[Tensor], Optional[int]]:
    """The keep mask of a C++ op's call (after ``replicas_outer`` at ``outer_at``) and its replica dim."""
    if len(args) <= outer_at + 1 or args[outer_at + 1] is None:
        return None, None
    return args[outer_at + 1], dims[outer_at + 1]


def _folded_keep(args: Sequence[Any], dims: Sequence[Any], outer_at: int, batch: int) -> Tuple[Any, ...]:
    """The trailing ``(replicas_outer, keep)`` of a folded C++ call: the keep mask ``(E, R*H)`` like a bias;
    nothing when the call has no mask (the Triton ops take none)."""
    keep, dim = _keep(args, dims, outer_at)
    return () if keep is None else (False, _fold(keep, dim, batch))


#: the torch.library registrations the compiled ops need (all from torch 2.4)
NEEDED = ("custom_op", "register_fake", "register_autograd", "register_vmap")


class RulesUnavailable(RuntimeError):
    """This torch cannot register the compiled ops' rules (it predates ``torch.library.register_fake``)."""


def unavailable_reason() -> Optional[str]:
    """Why the rules cannot be registered on this torch, or ``None`` when they can."""
    missing = [name for name in NEEDED if not hasattr(torch.library, name)]
    if not missing:
        return None
    return (f"torch {torch.__version__} has no torch.library.{', torch.library.'.join(missing)} "
            "(torch >= 2.4): the compiled attention is not available, the plain torch ops are used")


def register(ns: str, replica_major: bool = False, graph_args: int = GRAPH_ARGS,
             gatv2_saves_per_edge: bool = False) -> None:
    """Register the fake, autograd and vmap rules of ``ns::{gatv2,gat}_{forward,backward}``.

    ``replica_major``: the ops take tensors with a leading replica dimension and a trailing
    ``replicas_outer`` flag (the C++ ops); otherwise replicas are folded into the heads.
    ``graph_args``: how many graph tensors follow the ops' feature tensors (they are shared by all
    replicas and get no gradient).  ``gatv2_saves_per_edge``: ``gatv2_forward``'s third output is per
    edge ``(E, H)``, not per node (the module docstring).  Raises :class:`RulesUnavailable` on a torch without the
    registration API."""
    reason = unavailable_reason()
    if reason is not None:
        raise RulesUnavailable(reason)
    ops = getattr(torch.ops, ns)
    lib = f"{ns}::"
    _register_fake(lib, gatv2_saves_per_edge)
    _register_autograd(lib, ops, graph_args)
    _register_vmap(lib, ops, replica_major, graph_args)


def direct_rules(ns: str, replica_major: bool = False, graph_args: int = GRAPH_ARGS) -> Dict[str, Callable[..., Any]]:
    """The forwards' vmap rules for :func:`zoo.ops._direct.vmapped`: as registered by :func:`register`,
    with each forward applied below autograd and its formula as the backward (no dispatch)."""
    ops = getattr(torch.ops, ns)
    direct = {name: direct_op(Formula(below_autograd(ops, name), setup, grad))
              for name, (grad, setup) in autograd_formulas(ops, graph_args).items()}
    shared = direct_op(shared_gatv2_formula(ops, graph_args))
    rules = vmap_rules(SimpleNamespace(**direct, gatv2_backward=ops.gatv2_backward, gat_backward=ops.gat_backward,
                                       gatv2_forward_shared=lambda x, x_dst, values, *rest: shared(x, *rest)),
                       replica_major, graph_args)
    return {name: rules[name] for name in direct}


def shared_gatv2_op(ns: str, graph_args: int = GRAPH_ARGS) -> Callable[..., Any]:
    """``op(x, att, *graph, slope, ...)``: GATv2 of one tensor as x_src, x_dst and values outside vmap, as one
    autograd node of ``(x, att)`` (:func:`shared_gatv2_formula`: the gradient the stacked replicas get)."""
    return direct_op(shared_gatv2_formula(getattr(torch.ops, ns), graph_args))


def shared_gatv2_formula(ops: Any, graph_args: int) -> Formula:
    """``gatv2_forward(x, x, x, att, ...)`` as one autograd node of ``(x, att, ...)``: GATv2 with shared
    weights passes one tensor as x_src, x_dst and values.  As three inputs, the backward's three
    gradients reached autograd as three tensors, which it summed into a fourth, ``(d values + d x_dst)
    + d x_src`` (the order its engine takes the three views' nodes in: the last made first); this node
    returns that sum itself, in that order (so the same bits): the op's ``gatv2_backward_summed`` where
    the namespace has it (the C++ one sums each row as its three parts are done), else added in place
    into ``d values``."""
    kernel = below_autograd(ops, "gatv2_forward")
    summed = getattr(ops, "gatv2_backward_summed", None)

    def setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        x, att = inputs[:2]
        ctx.save_for_backward(x, att, output[0], output[2], *inputs[2:2 + graph_args])
        ctx.trailing = tuple(inputs[2 + graph_args:])

    def grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
             _grad_saved: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        x, att, out, saved, *graph = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        nones = (None,) * (graph_args + len(ctx.trailing))
        if summed is not None:
            return summed(grad_out.contiguous(), grad_alpha, x, att, out, saved, *graph, *ctx.trailing) + nones
        d_src, d_dst, d_val, d_att = ops.gatv2_backward(grad_out.contiguous(), grad_alpha, x, x, x, att, out, saved,
                                                        *graph, *ctx.trailing)
        return (d_val.add_(d_dst).add_(d_src), d_att) + nones

    return Formula(lambda x, att, *rest: kernel(x, x, x, att, *rest), setup, grad)


def _register_fake(lib: str, gatv2_saves_per_edge: bool) -> None:
    """The ops' fake (meta) kernels: output shapes only, for tracing and compile."""
    def fwd_fake(values: Tensor, col: Tensor, heads: int, per_edge: bool = False) -> Tuple[Tensor, Tensor, Tensor]:
        lead = values.shape[:-3]  # (R,) with a replica dimension, else ()
        n = values.shape[-3]
        return (values.new_empty(values.shape), values.new_empty((*lead, col.shape[0], heads)),
                values.new_empty((*lead, col.shape[0] if per_edge else n, heads)))

    @torch.library.register_fake(lib + "gatv2_forward")
    def _(x_src, x_dst, values, att, crow, col, perm, crow_s, col_s, perm_s, slope, *flags):
        return fwd_fake(values, col, x_src.shape[-2], gatv2_saves_per_edge)

    @torch.library.register_fake(lib + "gat_forward")
    def _(score_src, score_dst, bias, values, crow, col, perm, crow_s, col_s, perm_s, slope, *flags):
        return fwd_fake(values, col, score_src.shape[-1])

    @torch.library.register_fake(lib + "gatv2_backward")
    def _(grad_out, grad_alpha, x_src, x_dst, values, att, out, saved, *graph_and_slope):
        return (x_src.new_empty(x_src.shape), x_dst.new_empty(x_dst.shape), values.new_empty(values.shape),
                att.new_empty(att.shape))

    if hasattr(getattr(torch.ops, lib[:-2]), "gatv2_backward_summed"):
        @torch.library.register_fake(lib + "gatv2_backward_summed")
        def _(grad_out, grad_alpha, x, att, *rest):
            return x.new_empty(x.shape), att.new_empty(att.shape)

    @torch.library.register_fake(lib + "gat_backward")
    def _(grad_out, grad_alpha, score_src, score_dst, bias, values, out, lse, crow, col, *rest):
        return (score_src.new_empty(score_src.shape), score_dst.new_empty(score_dst.shape),
                values.new_empty(values.shape), values.new_empty((*score_src.shape[:-2], col.shape[0],
                                                                  score_src.shape[-1])))


def _register_autograd(lib: str, ops: Any, graph_args: int) -> None:
    """Each forward's backward op as its autograd formula."""
    for name, (grad, setup) in autograd_formulas(ops, graph_args).items():
        torch.library.register_autograd(lib + name, grad, setup_context=setup)


def autograd_formulas(ops: Any, graph_args: int) -> Dict[str, Tuple[Callable[..., Any], Callable[..., None]]]:
    """``{forward op: (backward, setup_context)}``: each forward's backward op as its autograd formula."""
    # inputs: 4 tensors, the graph tensors, slope [, replicas_outer]: the backward gets the same
    # trailing arguments, and no gradient for any of them.
    # output[2]: what the backward takes after out (the module docstring: lse, or the log alpha per edge)
    def gatv2_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        x_src, x_dst, values, att = inputs[:4]
        ctx.save_for_backward(x_src, x_dst, values, att, output[0], output[2], *inputs[4:4 + graph_args])
        ctx.trailing = tuple(inputs[4 + graph_args:])

    def gatv2_grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
                   _grad_saved: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        x_src, x_dst, values, att, out, saved, *graph = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        d_src, d_dst, d_val, d_att = ops.gatv2_backward(grad_out.contiguous(), grad_alpha, x_src, x_dst, values,
                                                        att, out, saved, *graph, *ctx.trailing)
        return (d_src, d_dst, d_val, d_att) + (None,) * (graph_args + len(ctx.trailing))

    def gat_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[Tensor, Tensor, Tensor]) -> None:
        score_src, score_dst, bias, values = inputs[:4]
        ctx.has_bias = bias is not None
        ctx.save_for_backward(score_src, score_dst, bias, values, output[0], output[2], *inputs[4:4 + graph_args])
        ctx.trailing = tuple(inputs[4 + graph_args:])

    def gat_grad(ctx: Any, grad_out: Optional[Tensor], grad_alpha: Optional[Tensor],
                 _grad_lse: Optional[Tensor]) -> Tuple[Optional[Tensor], ...]:
        score_src, score_dst, bias, values, out, lse, *graph = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        d_s, d_t, d_val, d_bias = ops.gat_backward(grad_out.contiguous(), grad_alpha, score_src, score_dst, bias,
                                                   values, out, lse, *graph, *ctx.trailing)
        return (d_s, d_t, d_bias if ctx.has_bias else None, d_val) + (None,) * (graph_args + len(ctx.trailing))

    return {"gatv2_forward": (gatv2_grad, gatv2_setup), "gat_forward": (gat_grad, gat_setup)}


def _register_vmap(lib: str, ops: Any, replica_major: bool, graph_args: int) -> None:
    """One call for all replicas under ``torch.func.vmap``: replicas first (the C++ ops) or folded into the heads."""
    for name, rule in vmap_rules(ops, replica_major, graph_args).items():
        torch.library.register_vmap(lib + name, rule)


def vmap_rules(ops: Any, replica_major: bool, graph_args: int) -> Dict[str, Callable[..., Any]]:
    """``{op: vmap rule}`` of the four ops, each calling ``ops``' ops on the physical tensors (see
    :func:`register`)."""
    def replicas_first(op: Any, info: Any, dims: Sequence[Any], args: Sequence[Any], tensors: int,
                       values_at: int) -> Optional[Tuple[Tuple[Tensor, ...], Tuple[int, ...]]]:
        """The C++ ops: all replicas in one call, replicas first (``tensors``: how many leading
        arguments carry replicas; ``values_at``: the values' position).  None: fold instead."""
        if not replica_major:
            return None
        _shared_graph(dims[tensors:tensors + graph_args])
        b = info.batch_size
        values, value_dim = args[values_at], dims[values_at]
        nested = values.dim() - (value_dim is not None) == 4  # already replicas first (a nested vmap)
        if not nested and _replica_bytes(values, value_dim, b) > FOLD_MAX_BYTES:
            return None  # rows of all replicas side by side: one contiguous read per edge
        outer = not _fold_fits(values, value_dim, b)
        if outer and not nested and _row_bytes(values, value_dim) <= FOLD_ROW_MAX_BYTES:
            return None  # narrow rows: one pass over the edges for all replicas (FOLD_ROW_MAX_BYTES)
        keep, keep_dim = _keep(args, dims, tensors + graph_args + 1)
        results = op(*_firsts(args[:tensors], dims[:tensors], b, nested),
                     *args[tensors:tensors + graph_args + 1], outer, _first(keep, keep_dim, b, nested))
        if nested:
            results = tuple(r.unflatten(0, (b, -1)) for r in results)
        return tuple(results), (0,) * len(results)

    def gatv2_op(args: Sequence[Any], dims: Sequence[Any]) -> Any:
        """The forward for these arguments: where x_src, x_dst and values are one tensor (shared weights)
        and the ops have it, the one that takes that tensor once (:func:`shared_gatv2_formula`)."""
        shared = getattr(ops, "gatv2_forward_shared", None)
        if shared is not None and args[0] is args[1] is args[2] and dims[0] == dims[1] == dims[2]:
            return shared
        return ops.gatv2_forward

    def gatv2_fwd_vmap(info: Any, in_dims: Sequence[Any], *args):
        forward = gatv2_op(args, in_dims)
        done = replicas_first(forward, info, in_dims, args, 4, 2)
        if done is not None:
            return done
        x_src, x_dst, values, att, *rest = args
        xs, xd, xv, xa = in_dims[:4]
        graph, slope = rest[:graph_args], rest[graph_args]
        _shared_graph(in_dims[4:4 + graph_args])
        b = info.batch_size
        out, alpha, saved = forward(*_folds((x_src, x_dst, values), (xs, xd, xv), b),
                                            _fold_att(att, xa, b), *graph, slope,
                                            *_folded_keep(args, in_dims, 4 + graph_args + 1, b))
        return (_unfold(out, b), _unfold(alpha, b), _unfold(saved, b)), (1, 1, 1)

    def gatv2_bwd_vmap(info: Any, in_dims: Sequence[Any], *args):
        done = replicas_first(ops.gatv2_backward, info, in_dims, args, 8, 4)
        if done is not None:
            return done
        grad_out, grad_alpha, x_src, x_dst, values, att, out, saved, *rest = args
        dg, dga, xs, xd, xv, xa, do, dl = in_dims[:8]
        graph, slope = rest[:graph_args], rest[graph_args]
        _shared_graph(in_dims[8:8 + graph_args])
        b = info.batch_size
        d_src, d_dst, d_val, d_att = ops.gatv2_backward(
            _fold(grad_out, dg, b).contiguous(), _fold(grad_alpha, dga, b),
            *_folds((x_src, x_dst, values), (xs, xd, xv), b), _fold_att(att, xa, b), _fold(out, do, b),
            _fold(saved, dl, b), *graph, slope,
            *_folded_keep(args, in_dims, 8 + graph_args + 1, b))
        return ((_unfold(d_src, b), _unfold(d_dst, b), _unfold(d_val, b), d_att.view(b, *att.shape[-2:])),
                (1, 1, 1, 0))

    def gat_fwd_vmap(info: Any, in_dims: Sequence[Any], *args):
        done = replicas_first(ops.gat_forward, info, in_dims, args, 4, 3)
        if done is not None:
            return done
        score_src, score_dst, bias, values, *rest = args
        ds, dt, dbias, dv = in_dims[:4]
        graph, slope = rest[:graph_args], rest[graph_args]
        _shared_graph(in_dims[4:4 + graph_args])
        b = info.batch_size
        out, alpha, lse = ops.gat_forward(_fold(score_src, ds, b), _fold(score_dst, dt, b), _fold(bias, dbias, b),
                                          _fold(values, dv, b), *graph, slope,
                                          *_folded_keep(args, in_dims, 4 + graph_args + 1, b))
        return (_unfold(out, b), _unfold(alpha, b), _unfold(lse, b)), (1, 1, 1)

    def gat_bwd_vmap(info: Any, in_dims: Sequence[Any], *args):
        done = replicas_first(ops.gat_backward, info, in_dims, args, 8, 5)
        if done is not None:
            return done
        grad_out, grad_alpha, score_src, score_dst, bias, values, out, lse, *rest = args
        dg, dga, ds, dt, dbias, dv, do, dl = in_dims[:8]
        graph, slope = rest[:graph_args], rest[graph_args]
        _shared_graph(in_dims[8:8 + graph_args])
        b = info.batch_size
        d_s, d_t, d_val, d_bias = ops.gat_backward(
            _fold(grad_out, dg, b).contiguous(), _fold(grad_alpha, dga, b), _fold(score_src, ds, b),
            _fold(score_dst, dt, b), _fold(bias, dbias, b), _fold(values, dv, b), _fold(out, do, b),
            _fold(lse, dl, b), *graph, slope, *_folded_keep(args, in_dims, 8 + graph_args + 1, b))
        return (_unfold(d_s, b), _unfold(d_t, b), _unfold(d_val, b), _unfold(d_bias, b)), (1, 1, 1, 1)

    return {"gatv2_forward": gatv2_fwd_vmap, "gatv2_backward": gatv2_bwd_vmap, "gat_forward": gat_fwd_vmap,
            "gat_backward": gat_bwd_vmap}
