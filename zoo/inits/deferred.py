"""Inits that need the graph and the features: run once, at the model's first forward.

An init plugin is ``init(model, **options)`` and sees no data; SPoGInit and G-Init measure the
network on its graph.  :func:`at_first_forward` registers a one-shot forward pre-hook that calls
``fn(model, graph, x)`` with the first forward's inputs, then lets that forward run with the new
weights.  Suites and ``zoo.fit`` dry-run every replica right after building it (seeded with the
replica's seed, on the task's graph and features), so the init runs there, before training and
before the replicas are stacked; a model built in Python runs it at its first call.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

import torch
from torch import nn

DataInit = Callable[[nn.Module, Any, torch.Tensor], None]


def at_first_forward(model: nn.Module, fn: DataInit) -> None:
    """Run ``fn(model, graph, x)`` once, with the first forward's ``(graph, x)``, before that forward.

    The init runs with gradients enabled and the model in evaluation mode (no dropout, running
    statistics untouched); the training mode is restored afterwards.  Re-applying an init replaces
    a pending one; loading a state dict into the model cancels it."""
    pending = getattr(model, "_pending_data_init", None)
    if pending is not None:
        pending.remove()

    def hook(module: nn.Module, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
        handle.remove()
        module._pending_data_init = None
        graph = args[0] if args else kwargs["graph"]
        x = args[1] if len(args) > 1 else kwargs["x"]
        training = module.training
        module.eval()
        try:
            with torch.enable_grad():
                fn(module, graph, x)
        finally:
            module.train(training)

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    model._pending_data_init = handle
    # Loaded weights (zoo.load, a resume, load_state_dict) replace the init: it must not run over them.
    model.register_load_state_dict_post_hook(lambda module, keys: cancel(module))


def cancel(model: nn.Module) -> None:
    """Drop a pending data-dependent init (the model's weights come from elsewhere)."""
    pending = getattr(model, "_pending_data_init", None)
    if pending is not None:
        pending.remove()
        model._pending_data_init = None


def pending(model: nn.Module) -> bool:
    """Whether a data-dependent init waits for ``model``'s first forward."""
    return getattr(model, "_pending_data_init", None) is not None
