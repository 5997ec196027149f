"""Edge-wise primitives that stay fast when ``torch.func.vmap`` batches them.

The benchmark runner trains many replicas of one architecture at once by vmapping a
functional call over stacked parameters.  Under ``vmap`` PyTorch lowers ``index_select`` /
``index_add`` on a batched tensor to ``gather`` / ``scatter_add`` with an index expanded to
the full ``(replicas, E, heads, channels)`` shape — several times the memory traffic of the
data itself.  :func:`gather_rows` and :func:`scatter_rows` are two small custom operators
(each the other's adjoint) whose vmap rule instead places the replica dimension right after
the indexed one and calls the same operator once on the physical tensor: one
``index_select`` / ``index_add`` of contiguous ``(replicas x ...)`` rows, with the original
``(E,)`` index.
All functions here are out-of-place (in-place scatters into fresh tensors cannot be vmapped).
"""
from __future__ import annotations

import warnings
import weakref
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


# torch.library.custom_op / register_vmap exist from torch 2.5; older versions use plain ops.
_HAS_CUSTOM_OPS = hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_vmap")

if _HAS_CUSTOM_OPS:
    @torch.library.custom_op("zoo::gather_rows", mutates_args=())
    def _gather_rows(x: Tensor, index: Tensor, dim: int) -> Tensor:
        return x.index_select(dim, index)


    @torch.library.custom_op("zoo::scatter_rows", mutates_args=())
    def _scatter_rows(src: Tensor, index: Tensor, dim: int, size: int) -> Tensor:
        shape = list(src.shape)
        shape[dim] = size
        return src.new_zeros(shape).index_add_(dim, index, src)


    @_gather_rows.register_fake
    def _(x: Tensor, index: Tensor, dim: int) -> Tensor:
        shape = list(x.shape)
        shape[dim] = index.numel()
        return x.new_empty(shape)


    @_scatter_rows.register_fake
    def _(src: Tensor, index: Tensor, dim: int, size: int) -> Tensor:
        shape = list(src.shape)
        shape[dim] = size
        return src.new_empty(shape)


    def _gather_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        x, index, dim = inputs
        ctx.save_for_backward(index)
        ctx.dim, ctx.size = dim, x.shape[dim]


    def _gather_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None]:
        (index,) = ctx.saved_tensors
        return _scatter_rows(grad.contiguous(), index, ctx.dim, ctx.size), None, None


    def _scatter_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        _, index, dim, _ = inputs
        ctx.save_for_backward(index)
        ctx.dim = dim


    def _scatter_backward(ctx: Any, grad: Tensor) -> Tuple[Tensor, None, None, None]:
        (index,) = ctx.saved_tensors
        return _gather_rows(grad, index, ctx.dim), None, None, None


    _gather_rows.register_autograd(_gather_backward, setup_context=_gather_setup)
    _scatter_rows.register_autograd(_scatter_backward, setup_context=_scatter_setup)


    def _gather_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, index: Tensor, dim: int) -> Tuple[Tensor, int]:
        x_dim, index_dim, _ = in_dims
        if index_dim is not None:  # per-replica indices (not used by the zoo): one call per replica
            x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(info.batch_size, *x.shape)
            index = index.movedim(index_dim, 0)
            return torch.stack([_gather_rows(x[r], index[r], dim) for r in range(info.batch_size)]), 0
        # Replica dim right after the indexed dim: every gathered row is one contiguous block.
        return _gather_rows(x.movedim(x_dim, dim + 1), index, dim), dim + 1


    def _scatter_vmap(info: Any, in_dims: Sequence[Any], src: Tensor, index: Tensor, dim: int,
                      size: int) -> Tuple[Tensor, int]:
        src_dim, index_dim, _, _ = in_dims
        if index_dim is not None:
            src = src.movedim(src_dim, 0) if src_dim is not None else src.expand(info.batch_size, *src.shape)
            index = index.movedim(index_dim, 0)
            return torch.stack([_scatter_rows(src[r], index[r], dim, size) for r in range(info.batch_size)]), 0
        return _scatter_rows(src.movedim(src_dim, dim + 1), index, dim, size), dim + 1


    torch.library.register_vmap("zoo::gather_rows", _gather_vmap)
    torch.library.register_vmap("zoo::scatter_rows", _scatter_vmap)


# Outside vmap the plain aten ops are used: a custom op costs a Python dispatch per call.
_is_batched = (getattr(torch._C._functorch, "is_batchedtensor", lambda t: True) if _HAS_CUSTOM_OPS
               else (lambda t: False))


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` along dim 0 (``(N, ...)`` -> ``(E, ...)``), vmap-efficient."""
    if _is_batched(x):
        return _gather_rows(x, index, 0)
    return x.index_select(0, index)


# aten's index_add autograd keeps the whole ``source`` (e.g. the (E, H, C) messages) alive for the
# backward, which needs only the index: above this size the custom op (it saves the index alone)
# is used with grad too; below it the plain op avoids the custom op's Python dispatch.
_SAVE_FREE_MIN_NUMEL = 1 << 16


def segment_sum(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Sum the rows of ``values`` (``(E, ...)``) into ``num_segments`` buckets given by ``index`` (``(E,)``)."""
    if _is_batched(values) or (_HAS_CUSTOM_OPS and values.requires_grad and torch.is_grad_enabled()
                               and values.numel() >= _SAVE_FREE_MIN_NUMEL):
        return _scatter_rows(values, index, 0, num_segments)
    return values.new_zeros((num_segments,) + tuple(values.shape[1:])).index_add_(0, index, values)


class _LeakyReluDot(torch.autograd.Function):
    """``(LeakyReLU(h) * a).sum(-1)`` that keeps only ``h`` for the backward (LeakyReLU(h) is recomputed)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(hidden: Tensor, att: Tensor, slope: float) -> Tensor:
        return (torch.nn.functional.leaky_relu(hidden, slope) * att).sum(-1)

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        hidden, att, slope = inputs
        ctx.save_for_backward(hidden, att)
        ctx.slope = slope

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], None]:
        hidden, att = ctx.saved_tensors
        g = grad.unsqueeze(-1)
        grad_hidden = grad_att = None
        if ctx.needs_input_grad[0]:
            grad_hidden = torch.ops.aten.leaky_relu_backward(g * att, hidden, ctx.slope, False)
        if ctx.needs_input_grad[1]:
            grad_att = (g * torch.nn.functional.leaky_relu(hidden, ctx.slope)).sum_to_size(att.shape)
        return grad_hidden, grad_att, None


class _WeightMessages(torch.autograd.Function):
    """``weights[..., None] * values`` whose backward computes the weights' gradient as a batched
    dot product (einsum -> bmm) instead of materialising another ``(E, H, C)`` product."""

    generate_vmap_rule = True

    @staticmethod
    def forward(weights: Tensor, values: Tensor) -> Tensor:
        return weights.unsqueeze(-1) * values

    @staticmethod
    def setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
        weights, values = ctx.saved_tensors
        grad_weights = torch.einsum("...c,...c->...", grad, values) if ctx.needs_input_grad[0] else None
        grad_values = grad * weights.unsqueeze(-1) if ctx.needs_input_grad[1] else None
        return grad_weights, grad_values


def weight_messages(weights: Tensor, values: Tensor) -> Tensor:
    """Messages ``alpha_uv * m_uv`` per edge and head: ``(E, H)``, ``(E, H, C)`` -> ``(E, H, C)``.

    Same forward as ``weights.unsqueeze(-1) * values``; the backward's peak memory is one
    ``(E, H, C)`` temporary lower (the weights' gradient needs no elementwise product).
    """
    return _WeightMessages.apply(weights, values)


def leaky_relu_dot(hidden: Tensor, att: Tensor, negative_slope: float) -> Tensor:
    r"""GATv2's score :math:`a^\top \mathrm{LeakyReLU}(h)` per edge and head.

    Same numbers as ``(F.leaky_relu(hidden, s) * att).sum(-1)``, but autograd keeps one
    ``(E, H, C)`` tensor (``hidden``) instead of two.  Shapes: ``(E, H, C)``, ``(H, C)`` -> ``(E, H)``.
    """
    return _LeakyReluDot.apply(hidden, att, negative_slope)


def node_scores(x: Tensor, att_src: Tensor, att_dst: Tensor) -> Tuple[Tensor, Tensor]:
    r"""GAT's per-node attention terms :math:`a_s^\top x_{v,h}` and :math:`a_t^\top x_{v,h}` per head.

    Same values as ``(x * att_src).sum(-1), (x * att_dst).sum(-1)`` (to rounding), computed as one
    matrix product ``x.view(N, H*C) @ B`` with ``B`` the ``(H*C, 2H)`` block-diagonal matrix of both
    attention vectors: ``x`` is read once and the backward is two more products, instead of
    ``(N, H, C)`` temporaries for each product and gradient (under vmap: one ``bmm``).  With several
    heads a non-finite entry of one head's ``x`` also makes the other heads' terms NaN (``inf * 0``).

    Shapes: x ``(N, H, C)``, att_src and att_dst ``(H, C)`` -> two ``(N, H)``.
    """
    n, heads, channels = x.shape
    both = torch.cat([att_src, att_dst], 0)  # (2H, C)
    if heads > 1:  # B[h*C + c, j] = both[j, c] if j % H == h else 0
        mask = torch.eye(heads, dtype=x.dtype, device=x.device).repeat(2, 1)  # (2H, H)
        both = (both.unsqueeze(1) * mask.unsqueeze(-1)).reshape(2 * heads, heads * channels)
    scores = x.reshape(n, heads * channels) @ both.t()
    return scores[:, :heads], scores[:, heads:]


def segment_max(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Per-bucket maximum of ``values`` (``(E, H)``); empty buckets hold ``-inf``."""
    out = values.new_full((num_segments,) + tuple(values.shape[1:]), float("-inf"))
    idx = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, idx, values, reduce="amax", include_self=True)


def segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    r"""Softmax of edge ``scores`` over the edges that share a destination.

    .. math:: \alpha_{uv} = \frac{\exp(e_{uv} - m_v)}{\sum_{u' \in \mathcal N(v)} \exp(e_{u'v} - m_v)},
              \quad m_v = \max_{u \in \mathcal N(v)} e_{uv}

    Shapes:
        scores: ``(E, H)``; index: ``(E,)`` destination of each edge; returns ``(E, H)``.
    """
    # The shift m_v does not change the softmax, so it needs no gradient (as in PyG).
    shift = gather_rows(segment_max(scores.detach(), index, num_segments), index)
    weights = (scores - shift).exp()
    denom = gather_rows(segment_sum(weights, index, num_segments), index)
    return weights / (denom + 1e-16)


# --------------------------------------------------------------------------- sparse input features

#: A constant input with at most this fraction of non-zeros is multiplied as CSR when it has at
#: least SPARSE_MIN_ELEMENTS entries or the weight is stacked (replicas).  Measured fwd+bwd,
#: 64 outputs, 1 thread (CSR / dense): Cora (1.3 % non-zero) 0.18 at 1 replica, 0.19 at 15;
#: Cornell (183 x 1703, 4.9 %) 1.18 at 1, 0.54 at 15; PubMed (10 %) 0.89 at 1, 1.72 at 15.
SPARSE_MIN_ELEMENTS = 2 ** 20
SPARSE_MAX_DENSITY = 0.05


class _SparseInputs:
    """CSR copies (and their transposes, for the weight gradient) of constant input tensors,
    keyed by ``id`` and dropped with the tensor; ``None`` records "keep dense"."""

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple[Any, int, Optional[Tuple[Tensor, ...]]]] = {}

    def get(self, x: Tensor) -> Optional[Tuple[Tensor, ...]]:
        hit = self._entries.get(id(x))
        if hit is not None and hit[0]() is x and hit[1] == x._version:
            return hit[2]
        parts = self._convert(x)
        try:
            ref = weakref.ref(x)
        except TypeError:
            return parts
        if hit is None:
            weakref.finalize(x, self._entries.pop, id(x), None)
        self._entries[id(x)] = (ref, x._version, parts)
        return parts

    @staticmethod
    def _convert(x: Tensor) -> Optional[Tuple[Tensor, ...]]:
        if int(torch.count_nonzero(x)) > SPARSE_MAX_DENSITY * x.numel():
            return None
        with warnings.catch_warnings():  # "sparse CSR support is in beta"
            warnings.simplefilter("ignore", UserWarning)
            csr, csr_t = x.to_sparse_csr(), x.t().contiguous().to_sparse_csr()
        return (csr.crow_indices(), csr.col_indices(), csr.values(),
                csr_t.crow_indices(), csr_t.col_indices(), csr_t.values())


_SPARSE = _SparseInputs()


def _csr(crow: Tensor, col: Tensor, val: Tensor, rows: int, cols: int) -> Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, (rows, cols), check_invariants=False)


if _HAS_CUSTOM_OPS:
    @torch.library.custom_op("zoo::csr_linear", mutates_args=())
    def _csr_linear(crow: Tensor, col: Tensor, val: Tensor, crow_t: Tensor, col_t: Tensor, val_t: Tensor,
                    weight: Tensor) -> Tensor:
        rows, cols = crow.numel() - 1, crow_t.numel() - 1
        return torch.sparse.mm(_csr(crow, col, val, rows, cols), weight.t().contiguous())


    @_csr_linear.register_fake
    def _(crow, col, val, crow_t, col_t, val_t, weight):
        return weight.new_empty((crow.numel() - 1, weight.size(0)))


    def _csr_setup(ctx: Any, inputs: Tuple[Any, ...], output: Tensor) -> None:
        ctx.save_for_backward(*inputs[3:6])


    def _csr_backward(ctx: Any, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        crow_t, col_t, val_t = ctx.saved_tensors
        x_t = _csr(crow_t, col_t, val_t, crow_t.numel() - 1, grad.size(0))
        # d(X W^T)/dW = grad^T X = (X^T grad)^T; the inputs X get no gradient (constants)
        return None, None, None, None, None, None, torch.sparse.mm(x_t, grad.contiguous()).t()


    _csr_linear.register_autograd(_csr_backward, setup_context=_csr_setup)


    def _csr_linear_vmap(info: Any, in_dims: Sequence[Any], *args: Any) -> Tuple[Tensor, int]:
        *parts, weight = args
        if any(d is not None for d in in_dims[:6]):
            raise ValueError("csr_linear: the sparse input must be shared by all replicas")
        w = weight.movedim(in_dims[6], 0)  # (R, C, F) -> one (N, R*C) product
        out = _csr_linear(*parts, w.reshape(-1, w.size(-1)))
        return out.view(out.size(0), w.size(0), w.size(1)), 1


    torch.library.register_vmap("zoo::csr_linear", _csr_linear_vmap)


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T``; a large, sparse, constant ``x`` (bag-of-words input features, the same
    tensor every epoch, no gradient) is multiplied as CSR, else the dense ``F.linear``.

    Shapes: x ``(N, F)``, weight ``(C, F)`` -> ``(N, C)``.
    """
    parts = _sparse_parts(x, weight)
    if parts is not None:
        return _csr_linear(*parts, weight)
    return F.linear(x, weight)


def _sparse_parts(x: Tensor, weight: Tensor) -> Optional[Tuple[Tensor, ...]]:
    """The CSR form of ``x`` when :func:`linear` should use it (see SPARSE_MAX_DENSITY), else ``None``."""
    if not (_HAS_CUSTOM_OPS and x.dim() == 2 and x.layout == torch.strided and not x.requires_grad
            and not _is_batched(x) and x.is_floating_point()):
        return None
    if x.numel() < SPARSE_MIN_ELEMENTS and not _is_batched(weight):
        return None
    return _SPARSE.get(x)


# --------------------------------------------------------------------------- per-replica dropout


class ReplicaRandomness:
    """One random stream per replica, seeded by that replica's own seed.

    Inside :func:`replica_randomness`, :func:`dropout` draws replica ``r``'s mask from stream
    ``r`` with the replica's own shape, whether the replicas run stacked under ``vmap`` or one at
    a time — so a replica's dropout masks (and numbers) do not depend on which other replicas
    share its group (issue 11 item 6).
    """

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds = [int(s) for s in seeds]
        self._generators: Dict[Tuple[int, str], torch.Generator] = {}

    def generator(self, replica: int, device: torch.device) -> torch.Generator:
        key = (replica, str(device))
        if key not in self._generators:
            # a stream distinct from the seed's torch.manual_seed stream used for initialisation
            self._generators[key] = torch.Generator(device=device).manual_seed(
                (self.seeds[replica] * 1_000_003 + 0x5EED) % 2 ** 63)
        return self._generators[key]

    def get_state(self) -> Dict[Tuple[int, str], Tensor]:
        """The streams' positions (for replaying a recomputed block, e.g. activation checkpointing)."""
        return {key: gen.get_state() for key, gen in self._generators.items()}

    def set_state(self, state: Dict[Tuple[int, str], Tensor]) -> None:
        """Rewind to ``get_state()``'s positions; streams created since then start afresh."""
        for key in list(self._generators):
            if key not in state:
                del self._generators[key]
        for key, value in state.items():
            self._generators[key].set_state(value)

    def mask(self, replica: int, like: Tensor, p: float) -> Tensor:
        """``(1 - p)``-Bernoulli keep mask scaled by ``1 / (1 - p)`` (as ``F.dropout``), shaped like ``like``."""
        keep = torch.empty(like.shape, dtype=like.dtype, device=like.device)
        # called from the vmap rule too: draw as plain tensors, outside vmap's randomness handling
        with _no_vmap_randomness():
            keep.bernoulli_(1.0 - p, generator=self.generator(replica, like.device))
        return keep.div_(1.0 - p)


def _no_vmap_randomness() -> Any:
    key = getattr(torch._C.DispatchKey, "FuncTorchVmapMode", None)
    if key is None:
        from contextlib import nullcontext
        return nullcontext()
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key))


_ACTIVE: List[Tuple[ReplicaRandomness, Tensor]] = []


def active_replica_randomness() -> Optional[Tuple[ReplicaRandomness, Tensor]]:
    """The innermost :func:`replica_randomness` context's ``(rng, token)``, or ``None``."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def replica_randomness(rng: ReplicaRandomness, token: Tensor) -> Iterator[None]:
    """Route :func:`dropout` to ``rng``; ``token`` holds the replica index (``()``; batched under vmap)."""
    _ACTIVE.append((rng, token))
    try:
        yield
    finally:
        _ACTIVE.pop()


if _HAS_CUSTOM_OPS:
    @torch.library.custom_op("zoo::replica_dropout_mask", mutates_args=())
    def _replica_mask(like: Tensor, token: Tensor, p: float) -> Tensor:
        return _ACTIVE[-1][0].mask(int(token), like, p)


    @_replica_mask.register_fake
    def _(like: Tensor, token: Tensor, p: float) -> Tensor:
        return torch.empty_like(like)


    def _replica_mask_vmap(info: Any, in_dims: Sequence[Any], like: Tensor, token: Tensor,
                           p: float) -> Tuple[Tensor, int]:
        like_dim, token_dim, _ = in_dims
        rng = _ACTIVE[-1][0]
        tokens = token.movedim(token_dim, 0).tolist() if token_dim is not None else [int(token)] * info.batch_size
        one = like.select(like_dim, 0) if like_dim is not None else like
        return torch.stack([rng.mask(int(r), one, p) for r in tokens]), 0


    torch.library.register_vmap("zoo::replica_dropout_mask", _replica_mask_vmap)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout``, but inside :func:`replica_randomness` each replica draws from its own stream."""
    if not training or p == 0.0:
        return x
    if not _ACTIVE or not _HAS_CUSTOM_OPS:
        return F.dropout(x, p, True)
    return x * _replica_mask(x.detach(), _ACTIVE[-1][1], float(p))


__all__: List[str] = ["gather_rows", "segment_sum", "segment_max", "segment_softmax", "dropout", "linear",
                      "ReplicaRandomness", "replica_randomness", "active_replica_randomness", "leaky_relu_dot", "weight_messages", "node_scores"]
