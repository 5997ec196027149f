"""Replaying a recomputed block with the parameters and random streams of its first run.

Activation checkpointing recomputes a block in the backward pass.  Two things must be the same
as in the forward pass: the parameter tensors (``torch.func.functional_call`` — the benchmark's
replicas — has put the module's own parameters back by then) and the dropout masks.  torch's
global RNG is replayed by ``torch.utils.checkpoint`` itself; the per-replica dropout streams of
:mod:`zoo.ops.dropout` are not, so their positions are remembered here and rewound.
"""
from __future__ import annotations

from typing import Callable, TypeVar

from torch import nn
from torch.nn.utils.stateless import _reparametrize_module  # what torch.func.functional_call uses

from zoo.ops.dropout import active_replica_randomness, replica_randomness

T = TypeVar("T")


def replayable(module: nn.Module, block: Callable[..., T]) -> Callable[..., T]:
    """``block`` bound to ``module``'s parameter and buffer tensors in use *now*; its second and
    later calls draw the same per-replica dropout masks as the first (the streams' positions are
    rewound, then restored), so a recomputation reproduces the forward pass."""
    state = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    active = active_replica_randomness()
    rng_state = active[0].get_state() if active is not None else None
    calls = [0]

    def replay(*args: object) -> T:
        calls[0] += 1
        with _reparametrize_module(module, state):
            if active is None:
                return block(*args)
            rng, token = active
            if calls[0] == 1:
                with replica_randomness(rng, token):
                    return block(*args)
            now = rng.get_state()
            rng.set_state(rng_state)
            try:
                with replica_randomness(rng, token):
                    return block(*args)
            finally:
                rng.set_state(now)

    return replay


__all__ = ["replayable"]
