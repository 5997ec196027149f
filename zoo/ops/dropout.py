"""Dropout with one random stream per replica (the benchmark's stacked replicas draw the masks
they would draw trained alone)."""
from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.ops._constant_cache import ConstantCache
from zoo.ops._custom import HAS_CUSTOM_OPS as _HAS_CUSTOM_OPS
from zoo.ops._custom import custom_op as _custom_op
from zoo.ops._custom import custom_ops_active
from zoo.ops._custom import is_batched as _is_batched
from zoo.ops._custom import no_vmap_randomness as _no_vmap_randomness
from zoo.ops._custom import under_vmap
from zoo.ops.sparse_input import SparseInput
from zoo.ops.sparse_linear import each_parts, remember_each_stack



def keep_draws(shape: Sequence[int], q: float, generator: Optional[torch.Generator], dtype: torch.dtype,
               device: torch.device) -> Tensor:
    """Bernoulli(``q``) 0/1 draws of ``shape`` as ``dtype``: uniform draws compared with ``q``.

    Why not ``bernoulli_``: PyTorch's CPU kernel for it draws element by element, a few times
    slower than ``uniform_`` plus a comparison (``benchmarks/speed_dropout.py --draw`` prints the
    ratio), and a GAT's attention dropout draws one number per edge and head every epoch.  Below
    single precision the uniforms are float32 (a half-precision uniform would move ``q`` by up to
    2^-8); float32's 24 random bits put ``q`` within 2^-24 of exact.
    """
    draw = dtype if dtype in (torch.float32, torch.float64) else torch.float32
    keep = torch.rand(shape, generator=generator, dtype=draw, device=device).lt_(q)
    return keep if draw == dtype else keep.to(dtype)


def _keep_mask_kernel(dtype: torch.dtype, device: torch.device) -> Optional[Any]:
    """The compiled ``keep_mask`` draw where it serves (float32 on the CPU, kernels built), else ``None``."""
    if device.type != "cpu" or dtype != torch.float32:
        return None
    from zoo.ops._compiled.build import load_cpu_kernels

    return getattr(torch.ops.zoo_kernels, "keep_mask", None) if load_cpu_kernels() else None


def _keep_mask_rows_kernel(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether the compiled ``keep_mask_rows`` draw serves (float32 on the CPU, kernels built)."""
    return _keep_mask_kernel(dtype, device) is not None and hasattr(torch.ops.zoo_kernels, "keep_mask_rows")


@functools.lru_cache(maxsize=None)
def _keep_scale(p: float, dtype: torch.dtype) -> float:
    """The kept entries' value in :meth:`ReplicaRandomness.mask`: ``1 / (1 - p)`` as torch's ``div_``
    rounds it in ``dtype`` (taken from that op, so the compiled draw's mask equals torch's bitwise)."""
    return float(torch.ones(16, dtype=dtype).div_(1.0 - p)[0])


class ReplicaRandomness:
    """One random stream per replica, seeded by that replica's own seed.

    Inside :func:`replica_randomness`, :func:`dropout` draws replica ``r``'s mask from stream
    ``r`` with the replica's own shape, whether the replicas run stacked under ``vmap`` or one at
    a time — so a replica's dropout masks (and numbers) do not depend on which other replicas
    share its group.
    """

    def __init__(self, seeds: Sequence[int]) -> None:
        self.seeds = [int(s) for s in seeds]
        self._generators: Dict[Tuple[int, str], torch.Generator] = {}
        self._tokens: Optional[Tensor] = None
        self._token_at: Dict[int, int] = {}

    def tokens(self, device: torch.device) -> Tensor:
        """The ``(R,)`` replica indices ``0 .. R-1`` on ``device`` that :func:`replica_randomness`
        takes; :meth:`indices` reads them back without a device-to-host copy."""
        self._tokens = torch.arange(len(self.seeds), device=device)
        step = self._tokens.element_size()
        self._token_at = {self._tokens.data_ptr() + r * step: r for r in range(len(self.seeds))}
        return self._tokens

    def indices(self, token: Tensor) -> List[int]:
        """The replica indices held by ``token`` (one, or a 1-D batch): known on the host for views of
        :meth:`tokens` (looked up by address, so a GPU run does not wait for the device), else read."""
        if token.dim() <= 1 and self._token_at:
            step = token.element_size() * (token.stride(0) if token.dim() else 0)
            found = [self._token_at.get(token.data_ptr() + i * step) for i in range(token.numel())]
            if None not in found:
                return found  # type: ignore[return-value]
        return [int(r) for r in token.reshape(-1).tolist()]

    def generator(self, replica: int, device: torch.device) -> torch.Generator:
        key = (replica, str(device))
        if key not in self._generators:
            # a stream distinct from the seed's torch.manual_seed stream used for initialisation
            self._generators[key] = torch.Generator(device=device).manual_seed(
                (self.seeds[replica] * 1_000_003 + 0x5EED) % 2 ** 63)
        return self._generators[key]

    def generators(self) -> List[torch.Generator]:
        """Every stream made so far (a CUDA graph registers them: its replays advance them)."""
        return list(self._generators.values())

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

    def _keep(self, replica: int, shape: torch.Size, dtype: torch.dtype, device: torch.device, p: float) -> Tensor:
        """``(1 - p)``-Bernoulli 0/1 draws of ``shape`` from replica ``replica``'s stream."""
        # called from the vmap rules too: draw as plain tensors, outside vmap's randomness handling
        with _no_vmap_randomness():
            return keep_draws(shape, 1.0 - p, self.generator(replica, device), dtype, device)

    def mask(self, replica: int, like: Tensor, p: float, out: Optional[Tensor] = None) -> Tensor:
        """``(1 - p)``-Bernoulli keep mask scaled by ``1 / (1 - p)`` (as ``F.dropout``), shaped like ``like``
        (written into ``out``, a contiguous tensor of that shape and dtype, when given).

        A float32 mask on the CPU is drawn by the compiled ``keep_mask`` (one pass: the same numbers
        and the same stream position as the uniforms, comparison and scaling below), else by torch."""
        kernel = _keep_mask_kernel(like.dtype, like.device)
        if kernel is None:
            mask = self._keep(replica, like.shape, like.dtype, like.device, p).div_(1.0 - p)
            return mask if out is None else out.copy_(mask)
        out = torch.empty(like.shape, dtype=like.dtype, device=like.device) if out is None else out
        with _no_vmap_randomness():
            kernel(out, self.generator(replica, like.device), 1.0 - p, _keep_scale(p, like.dtype))
        return out

    def mask_rows(self, replica: int, out: Tensor, p: float) -> Tensor:
        """:meth:`mask` of ``out``'s shape written into ``out``, a 2-D float32 CPU tensor whose rows may lie
        apart (unit column stride; e.g. one replica's slice of an ``(E, R, H)`` stack): the same numbers from
        the same draws (the compiled ``keep_mask_rows``)."""
        with _no_vmap_randomness():
            torch.ops.zoo_kernels.keep_mask_rows(out, self.generator(replica, out.device), 1.0 - p,
                                                 _keep_scale(p, out.dtype))
        return out

    def dropped(self, replica: int, x: Tensor, p: float, out: Optional[Tensor] = None) -> Tensor:
        """``x * mask(replica, x, p)`` (written into ``out`` when given): where the compiled draw serves,
        in the same pass as the mask, which is then never written (the same numbers)."""
        kernel = _keep_mask_kernel(x.dtype, x.device)
        if kernel is None:
            return torch.mul(x, self.mask(replica, x, p), out=out) if out is not None else x * self.mask(replica, x, p)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
        with _no_vmap_randomness():
            kernel(out, self.generator(replica, x.device), 1.0 - p, _keep_scale(p, x.dtype), x)
        return out

    def kept_csr(self, replica: int, parts: Tuple[Tensor, Tensor, Tensor], ncols: int, p: float
                 ) -> Tuple[Tensor, Tensor, Tensor]:
        """The CSR parts ``(crow, col, values)`` of :meth:`dropped`'s result for the float32 CPU input of
        these CSR parts (``ncols`` columns): its kept non-zeros, the same numbers, from the same draws
        (the compiled ``keep_csr``: one word per entry of the input, as ``keep_mask``; the stream left
        where :meth:`dropped` leaves it)."""
        crow, col, values = parts
        with _no_vmap_randomness():
            return torch.ops.zoo_kernels.keep_csr(crow, col, values, self.generator(replica, values.device), 1.0 - p,
                                                  _keep_scale(p, values.dtype), ncols)

    def sparse_dropped(self, replica: int, nonzeros: SparseInput, p: float, remember: bool = True,
                       dense: bool = True) -> Tensor:
        """The sparse input with dropout drawn at its non-zeros only, from replica ``replica``'s stream
        (``remember``, ``dense``: see :meth:`SparseInput.dropped`)."""
        keep = self._keep(replica, nonzeros.values.shape, nonzeros.dtype, nonzeros.device, p)
        return nonzeros.dropped(keep, p, remember=remember, dense=dense)

    def sparse_dropped_stack(self, replicas: Sequence[int], nonzeros: SparseInput, p: float,
                             dense: bool = True) -> Tensor:
        """:meth:`sparse_dropped` of each of ``replicas``, stacked (the same numbers; one zeroed stack
        written at the non-zeros, its CSR forms remembered; ``dense``: see :meth:`SparseInput.stacked`)."""
        values = torch.empty((len(replicas), nonzeros.nnz), dtype=nonzeros.dtype, device=nonzeros.device)
        for i, r in enumerate(replicas):
            keep = self._keep(r, nonzeros.values.shape, nonzeros.dtype, nonzeros.device, p)
            torch.div(keep.mul_(nonzeros.values), 1.0 - p, out=values[i])  # SparseInput.dropped's numbers
        return nonzeros.stacked(values, dense=dense)


#: Dropout on a constant input with at least this many entries, of which at most
#: SPARSE_DROPOUT_MAX_DENSITY are non-zero, draws its mask at the non-zeros only.  Why: a zero
#: entry is zero whether dropped or not, so the result has F.dropout's distribution exactly,
#: and Cora's 2708 x 1433 features (1.3 % non-zero) need 49 k Bernoulli draws instead of 3.9 M
#: (the draws were half of a 2-layer SAN's epoch; benchmarks/speed_dropout.py).
SPARSE_DROPOUT_MIN_ELEMENTS = 2 ** 16
SPARSE_DROPOUT_MAX_DENSITY = 0.25


def _nonzeros_if_sparse(x: Tensor) -> Optional[SparseInput]:
    found = SparseInput(x)
    return found if found.positions.numel() <= SPARSE_DROPOUT_MAX_DENSITY * x.numel() else None


_SPARSE_INPUTS: ConstantCache[Optional[SparseInput]] = ConstantCache(_nonzeros_if_sparse)


def _sparse_input(x: Tensor) -> Optional[SparseInput]:
    """``x``'s non-zeros when dropout should draw at them alone: a large, mostly-zero, constant
    (no gradient, not replica-batched) input such as bag-of-words features; else ``None``."""
    if (x.requires_grad or x.numel() < SPARSE_DROPOUT_MIN_ELEMENTS or x.layout != torch.strided
            or not x.is_floating_point() or under_vmap(x)):
        return None
    return _SPARSE_INPUTS.get(x)


_ACTIVE: List[Tuple[ReplicaRandomness, Tensor]] = []
#: whether the caller of :func:`dropout` hands its result to :func:`zoo.ops.sparse_linear.linear` alone
_TO_LINEAR_ONLY: List[bool] = [False]


@contextmanager
def to_linear_only(promise: bool = True) -> Iterator[None]:
    """Within (``promise`` true): the caller promises that :func:`dropout`'s result is read by
    :func:`zoo.ops.sparse_linear.linear` alone.  The dropped copies of a sparse input (one replica's,
    or stacked replicas') are then not written densely: ``linear`` multiplies their stored entries,
    and writes the dense copy or stack only where it multiplies that instead (the same numbers,
    without ``R`` dense copies of the input written every epoch)."""
    _TO_LINEAR_ONLY.append(bool(promise))
    try:
        yield
    finally:
        _TO_LINEAR_ONLY.pop()


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


def _batch_replicas(rng: "ReplicaRandomness", token: Tensor, token_dim: Optional[int], batch: int) -> List[int]:
    """The replica of each of a vmap level's ``batch`` entries, from the token (``token_dim``: its
    batched dim, ``None`` when one token is shared by the whole batch)."""
    replicas = rng.indices(token.movedim(token_dim, 0) if token_dim is not None else token)
    return replicas if token_dim is not None else replicas * batch


if _HAS_CUSTOM_OPS:
    @_custom_op("zoo::replica_dropout_mask")
    def _replica_mask(like: Tensor, token: Tensor, p: float) -> Tensor:
        return _ACTIVE[-1][0].mask(_ACTIVE[-1][0].indices(token)[0], like, p)


    @_replica_mask.register_fake
    def _(like: Tensor, token: Tensor, p: float) -> Tensor:
        return torch.empty_like(like)


    def _replica_mask_vmap(info: Any, in_dims: Sequence[Any], like: Tensor, token: Tensor,
                           p: float) -> Tuple[Tensor, int]:
        like_dim, token_dim, _ = in_dims
        rng = _ACTIVE[-1][0]
        tokens = _batch_replicas(rng, token, token_dim, info.batch_size)
        one = like.select(like_dim, 0) if like_dim is not None else like
        if like_dim is None and one.dim() == 2 and _keep_mask_rows_kernel(one.dtype, one.device):
            # a shared (E, H) shape: the compiled attention's mask.  The replicas' masks side by side,
            # (E, R, H), the order in which the attention ops fold the replicas into the heads (no copy)
            out = torch.empty((one.size(0), len(tokens), one.size(1)), dtype=one.dtype, device=one.device)
            for i, r in enumerate(tokens):
                rng.mask_rows(int(r), out[:, i], p)
            return out, 1
        # each replica's mask drawn into its slice of the result: no stacked copy (R x the input's
        # size on a wide input layer)
        out = torch.empty((len(tokens), *one.shape), dtype=one.dtype, device=one.device)
        for i, r in enumerate(tokens):
            rng.mask(int(r), one, p, out=out[i])
        return out, 0


    torch.library.register_vmap("zoo::replica_dropout_mask", _replica_mask_vmap)


    @_custom_op("zoo::replica_input_dropout")
    def _replica_input_dropout(x: Tensor, token: Tensor, p: float) -> Tensor:
        rng = _ACTIVE[-1][0]
        return rng.dropped(rng.indices(token)[0], x, p)


    @_replica_input_dropout.register_fake
    def _(x: Tensor, token: Tensor, p: float) -> Tensor:
        return torch.empty_like(x)


    def _replica_input_dropout_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, token: Tensor,
                                    p: float) -> Tuple[Tensor, int]:
        if in_dims[0] is not None:
            raise ValueError("replica_input_dropout: the input must be shared by all replicas")
        rng = _ACTIVE[-1][0]
        tokens = _batch_replicas(rng, token, in_dims[1], info.batch_size)
        out = torch.empty((len(tokens), *x.shape), dtype=x.dtype, device=x.device)
        parts = _kept_as_csr(x)
        if parts is not None:  # read by linear alone: each replica's kept entries as CSR, the stack unwritten
            kept = [rng.kept_csr(int(r), parts, x.size(1), p) for r in tokens]
            remember_each_stack(out, kept, functools.partial(_write_kept, x=x, kept=kept))
            return out, 0
        for i, r in enumerate(tokens):
            rng.dropped(int(r), x, p, out=out[i])
        return out, 0


    def _kept_as_csr(x: Tensor) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        """``x``'s CSR parts where the stacked replicas' dropped copies of ``x`` are kept as CSR instead of
        written: only :func:`zoo.ops.sparse_linear.linear` reads them (:func:`to_linear_only`), ``x`` is a
        float32 CPU input that linear multiplies as CSR (:func:`zoo.ops.sparse_linear.each_parts`), and
        the compiled ``keep_csr`` is there."""
        if not _TO_LINEAR_ONLY[-1] or not hasattr(torch.ops.zoo_kernels, "keep_csr") or x.dtype != torch.float32:
            return None
        return each_parts(x)


    def _write_kept(stack: Tensor, x: Tensor, kept: List[Tuple[Tensor, Tensor, Tensor]]) -> Tensor:
        """Write the stack of dropped copies that :meth:`ReplicaRandomness.kept_csr` gave: slice ``r`` is
        ``x * 0`` (``x``'s signed zeros, as the mask's zeros give them) with the kept values in place."""
        for i, (crow, col, values) in enumerate(kept):
            torch.mul(x, 0.0, out=stack[i])
            rows = torch.repeat_interleave(torch.arange(x.size(0), device=x.device), crow.diff())
            stack[i].view(-1).index_copy_(0, rows * x.size(1) + col, values)
        return stack


    torch.library.register_vmap("zoo::replica_input_dropout", _replica_input_dropout_vmap)


    @_custom_op("zoo::replica_sparse_dropout")
    def _replica_sparse_dropout(x: Tensor, token: Tensor, p: float) -> Tensor:
        rng = _ACTIVE[-1][0]
        return rng.sparse_dropped(rng.indices(token)[0], _SPARSE_INPUTS.get(x), p, remember=False)


    @_replica_sparse_dropout.register_fake
    def _(x: Tensor, token: Tensor, p: float) -> Tensor:
        return torch.empty_like(x)


    def _replica_sparse_dropout_vmap(info: Any, in_dims: Sequence[Any], x: Tensor, token: Tensor,
                                     p: float) -> Tuple[Tensor, int]:
        if in_dims[0] is not None:
            raise ValueError("replica_sparse_dropout: the sparse input must be shared by all replicas")
        rng, nonzeros = _ACTIVE[-1][0], _SPARSE_INPUTS.get(x)
        tokens = _batch_replicas(rng, token, in_dims[1], info.batch_size)
        return rng.sparse_dropped_stack([int(r) for r in tokens], nonzeros, p, dense=not _TO_LINEAR_ONLY[-1]), 0


    torch.library.register_vmap("zoo::replica_sparse_dropout", _replica_sparse_dropout_vmap)


def dropout_mask(like: Tensor, p: float) -> Tensor:
    """The scaled keep mask (``0`` or ``1 / (1 - p)``) that :func:`dropout` would multiply a dense,
    grad-carrying ``like`` by, drawn from the same stream at the same point: for kernels that apply
    the dropout inside (the fused aggregation, :func:`zoo.ops.aggregate.edge_attention`), so
    switching the kernel does not change which entries are dropped."""
    if not _ACTIVE or not custom_ops_active():  # the global stream: F.dropout's own draw
        return F.dropout(torch.ones_like(like, requires_grad=False), p, True)
    return _replica_mask(like.detach(), _ACTIVE[-1][1], float(p))


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout``, but inside :func:`replica_randomness` each replica draws from its own stream."""
    if not training or p == 0.0:
        return x
    nonzeros = _sparse_input(x)
    if nonzeros is not None:
        # read by linear alone (to_linear_only): the dropped copy is written only where linear needs it
        dense = not _TO_LINEAR_ONLY[-1]
        if not _ACTIVE or not custom_ops_active():  # the global stream, as F.dropout
            keep = keep_draws(nonzeros.values.shape, 1.0 - p, None, x.dtype, x.device)
            return nonzeros.dropped(keep, p, dense=dense)
        rng, token = _ACTIVE[-1]
        if _is_batched(token):  # stacked replicas: each draws from its own stream (the vmap rule)
            return _replica_sparse_dropout(x, token, float(p))
        return rng.sparse_dropped(rng.indices(token)[0], nonzeros, p, dense=dense)
    if not _ACTIVE or not custom_ops_active():
        return F.dropout(x, p, True)
    token = _ACTIVE[-1][1]
    if _is_batched(token) and not under_vmap(x) and not x.requires_grad and \
            _keep_mask_kernel(x.dtype, x.device) is not None:
        # stacked replicas on one constant input (a dense input layer): each replica's dropped copy
        # drawn and multiplied in one compiled pass into its slice (the numbers of x * mask)
        return _replica_input_dropout(x, token, float(p))
    return x * dropout_mask(x, p)


__all__ = ["keep_draws", "ReplicaRandomness", "replica_randomness", "active_replica_randomness", "dropout", "dropout_mask",
           "to_linear_only"]
