"""R models of one architecture as stacked tensors, trained together.

A *group* is a list of models with identical architecture that differ only in seed and/or
initialisation.  Their parameters are stacked along a leading replica dimension
(``torch.func.stack_module_state``) and the forward pass is ``vmap`` of a functional call (the
base module run with a replica's tensors in place of its own: :class:`ModuleSlots`); with
``stacked=False`` every replica is run by a plain Python loop over the same call — the
one-at-a-time reference that grouped training must reproduce.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.parameter import is_lazy

from zoo.ops.dropout import ReplicaRandomness, replica_randomness
from zoo.trainer.config import TrainConfig
from zoo.trainer.resume import generator_states, load_generator_states, restore_params
from zoo.trainer.views import GraphListView, TransductiveView


class Replicas:
    """R models of one architecture as stacked tensors, with a batched forward.

    ``stacked=True`` runs all replicas in one ``vmap`` call; ``False`` loops over them (the
    reference path).  Dropout (:func:`zoo.ops.dropout.dropout`) draws replica ``r``'s masks
    from a stream seeded by ``seeds[r]`` alone, so a replica's numbers do not depend on its group
    or on the path.
    """

    def __init__(self, models: Sequence[nn.Module], stacked: bool = True,
                 seeds: Optional[Sequence[int]] = None, precision: str = "fp32") -> None:
        if not models:
            raise ValueError("a group needs at least one model")
        self.base = models[0]
        # a model that cannot run under torch.func.vmap (PyG's dense batching writes in place) is
        # trained by the one-at-a-time path: the same numbers, no stacking
        self.stacked = stacked and bool(getattr(getattr(self.base, "gnn", self.base), "vmap_safe", True))
        params, buffers = stack_module_state(list(models))
        self.names = list(params)
        self.params: List[Tensor] = [params[n].detach().requires_grad_(True) for n in self.names]
        self.buffers = buffers
        self.size = len(models)
        self.rng = ReplicaRandomness(range(self.size) if seeds is None else seeds)
        self.tokens = self.rng.tokens(self.params[0].device)  # the rng reads them back without a device sync
        #: ``"bf16"``: every forward under bfloat16 autocast (``TrainConfig.precision``)
        self.precision = precision
        self.slots = ModuleSlots.of(self.base, self.names, list(buffers))
        self._mode: Optional[bool] = None  # the base's train mode as last set here

    def num_parameters(self) -> int:
        return sum(p[0].numel() for p in self.params)

    def adopt_layout(self, grads: Sequence[Tensor]) -> bool:
        """Store a stacked parameter whose gradient interleaves the replicas in that gradient's layout.

        An op that folds the replicas into one product hands back such a gradient: the first
        layer's stacked CSR product ``X @ [W_1 .. W_R]^T`` multiplies by one ``(F, R*C)`` matrix,
        and its weight gradient comes back in that layout.  With the parameter in ``(R, C, F)``
        order the forward copied it into ``(F, R*C)`` every step and the optimiser read a
        transposed gradient against a row-major parameter (strided; on Cornell, 15 replicas, the
        step took 10 % of the epoch).  Stored like the gradient, the forward's transpose is a view
        and every optimiser pass is contiguous; the values are the same (tested bitwise).
        Gradients that keep the replicas outermost (a per-replica transpose, from batched
        matmuls) are left alone: a transposed operand changes a BLAS product's rounding.
        Call before the optimiser's state exists.  Returns whether any parameter moved.
        """
        moved = False
        for i, (p, g) in enumerate(zip(self.params, grads)):
            if g.shape != p.shape or g.dim() < 2 or g.stride() == p.stride() or g.stride(0) == max(g.stride()):
                continue
            new = torch.empty_like(g, dtype=p.dtype)  # keeps g's strides only if dense and non-overlapping
            if new.stride() != g.stride():
                continue
            self.params[i] = new.copy_(p.detach()).requires_grad_(True)
            moved = True
        return moved

    def _call(self, params: Dict[str, Tensor], buffers: Dict[str, Tensor], token: Tensor, *args: Any) -> Tensor:
        with replica_randomness(self.rng, token):
            if self.slots is None:
                return functional_call(self.base, (params, buffers), args)
            with self.slots.holding([*params.values(), *buffers.values()]):
                return self.base(*args)

    def forward(self, *args: Any, train: bool, params: Optional[List[Tensor]] = None) -> Tensor:
        """``(R, ...)`` outputs of every replica on the same inputs ``args`` (under bfloat16 autocast
        with ``precision = "bf16"``, the outputs cast back to the parameters' dtype)."""
        params = self.params if params is None else params
        self._set_mode(train)
        if self.precision == "bf16":
            with torch.autocast(params[0].device.type, dtype=torch.bfloat16):
                out = self._forward(dict(zip(self.names, params)), args)
            return out.to(params[0].dtype)  # the losses and metrics in the model's dtype
        return self._forward(dict(zip(self.names, params)), args)

    def _set_mode(self, train: bool) -> None:
        """``base.train(train)``, skipped when this object set that mode last and the base still has it
        (the call walks every sub-module: twice an epoch otherwise)."""
        if self._mode is not train or self.base.training is not train:
            self.base.train(train)
            self._mode = train

    def _forward(self, named: Dict[str, Tensor], args: Tuple[Any, ...]) -> Tensor:
        if self.stacked and self.size > 1:  # one replica: a plain call (vmap costs dispatch per op)
            fn = vmap(self._call, in_dims=(0, 0, 0, *([None] * len(args))), randomness="different")
            return fn(named, self.buffers, self.tokens, *args)
        outs = []
        for r in range(self.size):
            outs.append(self._call({n: p[r] for n, p in named.items()},
                                   {n: b[r] for n, b in self.buffers.items()}, self.tokens[r], *args))
        return outs[0].unsqueeze(0) if self.size == 1 else torch.stack(outs)

    def state_dict(self) -> Dict[str, Any]:
        """The stacked parameters (in their layout), buffers and dropout streams, for the resume state."""
        return {"params": [p.detach() for p in self.params],
                "buffers": {n: b.detach() for n, b in self.buffers.items()},
                "replica_rng": generator_states(self.rng)}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` (tensors on this device): new leaf parameters with the saved
        values and strides, running statistics (if a norm keeps any), every dropout stream."""
        self.params = restore_params(self.params, saved["params"])
        for n, b in self.buffers.items():
            b.copy_(saved["buffers"][n])
        load_generator_states(self.rng, saved["replica_rng"])

    def state_of(self, r: int, params: Optional[List[Tensor]] = None) -> Dict[str, Tensor]:
        params = self.params if params is None else params
        return {n: p[r].detach().clone() for n, p in zip(self.names, params)}


class ModuleSlots:
    """Where each stacked tensor of a :class:`Replicas` sits in its base module: the module and the
    attribute of every parameter and buffer, in the order of the replicas' names.

    :meth:`holding` puts given tensors in those places for a call and the module's own back after
    it, as ``torch.func.functional_call`` does (it too writes ``module._parameters[name]`` /
    ``module._buffers[name]``), without its per-call work: resolving every dotted name and walking
    the module tree for tied weights on every call (measured: docs/notes/performance.md).  Built only for a module whose every parameter and buffer has one
    name (:meth:`of`): with tied weights the loop keeps ``functional_call``.
    """

    def __init__(self, places: List[Tuple[nn.Module, str, bool]]) -> None:
        self.places = places  # (module, attribute, is a parameter)

    @classmethod
    def of(cls, base: nn.Module, params: Sequence[str], buffers: Sequence[str]) -> Optional["ModuleSlots"]:
        """The slots of ``params`` then ``buffers`` in ``base``, or ``None`` when a tensor is shared by
        several names (tied weights: setting one name must set them all)."""
        if len(list(base.named_parameters(remove_duplicate=False))) != len(params) or \
                len(list(base.named_buffers(remove_duplicate=False))) != len(buffers):
            return None
        places = []
        for names, is_param in ((params, True), (buffers, False)):
            for name in names:
                owner, _, attr = name.rpartition(".")
                module = base.get_submodule(owner)
                if attr not in (module._parameters if is_param else module._buffers):
                    return None
                places.append((module, attr, is_param))
        return cls(places)

    @contextlib.contextmanager
    def holding(self, tensors: Sequence[Tensor]) -> Iterator[None]:
        """``tensors`` (one per slot, in order) in the module for the duration of the block."""
        own = []
        for (module, attr, is_param), t in zip(self.places, tensors):
            table = module._parameters if is_param else module._buffers
            own.append(table[attr])
            table[attr] = t
        try:
            yield
        finally:
            for (module, attr, is_param), t in zip(self.places, own):
                (module._parameters if is_param else module._buffers)[attr] = t


def train_mode_differs(model: nn.Module) -> bool:
    """Whether ``model``'s training-mode forward can differ from its evaluation-mode forward:
    it draws dropout (:func:`draws_dropout`) or a norm normalises with the batch's statistics in
    training and with running estimates in evaluation (``BatchNorm``: Luo et al.'s ``--bn``,
    PyG's Polynormer and SGFormer)."""
    if draws_dropout(model):
        return True
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats for m in model.modules())


def draws_dropout(model: nn.Module) -> bool:
    """Whether a training-mode forward of ``model`` draws dropout masks: an ``nn.Dropout`` with
    ``p > 0``, or any sub-module's dropout rate above 0 — every numeric attribute whose name ends
    in ``dropout`` (``dropout``, ``attn_dropout``, SAN's ``input_dropout``, ...), since the
    models call :func:`zoo.ops.dropout.dropout` with their own rate attributes.

    Reading only the top-level ``dropout`` / ``attn_dropout`` missed SAN's ``input_dropout``:
    its validation and test accuracies were then measured with the input dropout on.
    """
    for module in model.modules():
        if isinstance(module, nn.Dropout) and module.p > 0:
            return True
        for name, value in vars(module).items():
            if name.endswith("dropout") and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value > 0:
                return True
    return False


def build_replicas(task: Any, factories: Sequence[Callable[[], nn.Module]], seeds: Sequence[int],
                   device: torch.device, dtype: torch.dtype, cfg: TrainConfig, stacked: bool,
                   dry_run: bool = True) -> Tuple[Replicas, Any]:
    """Seed, build, move and dry-run every replica, then stack them.

    The dry run (one no-grad forward) materialises lazily shaped parameters (GATDB's ``xi``).
    ``dry_run=False`` skips it for models without any: a group that is measured, not trained (the
    energy at initialisation), whose one other forward is the measurement.  A trained group keeps it
    even without lazy parameters: the dry run's draws from the global random stream (dropout outside
    the replicas' streams) are part of the stream that the graph transformers' positional-encoding
    sign flips read in training, so dropping it would change those runs' numbers."""
    models = []
    view: Any = None
    for factory, seed in zip(factories, seeds):
        torch.manual_seed(int(seed))
        model = factory().to(device=device, dtype=dtype)
        if view is None:
            gnn = getattr(model, "gnn", model)
            tied = bool(getattr(gnn, "graph_tied", False))
            edges = getattr(gnn, "edge_encoder", None) is not None
            view = (TransductiveView(task, device, dtype, edges) if task.kind == "transductive"
                    else GraphListView(task, device, dtype, cfg.batch_size, cfg.data_seed, tied, edges))
        if dry_run or any(is_lazy(p) for p in model.parameters()):
            view.dry_run(model)  # materialises lazily-shaped parameters (GATDB's xi) before stacking
        models.append(model)
    return Replicas(models, stacked=stacked, seeds=seeds, precision=cfg.precision), view
