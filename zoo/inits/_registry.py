"""The init registry: a leaf module the plugin modules import (never the package ``zoo.inits``,
whose ``__init__`` imports them).  Public names are re-exported by :mod:`zoo.inits`."""
from __future__ import annotations

import inspect
from typing import Any, Callable, List, Union

from torch import nn

from zoo._names import Registry, unknown_kwargs_error

InitFn = Callable[..., None]
INITS: Registry[InitFn] = Registry("init")


def register_init(name: str, aliases: tuple = ()) -> Callable[[InitFn], InitFn]:
    """Decorator registering an init function under ``name`` (and ``aliases``)."""

    def decorator(fn: InitFn) -> InitFn:
        INITS.add(name, fn, aliases)
        return fn

    return decorator


def list_inits() -> List[str]:
    return INITS.names()


def apply_init(model: nn.Module, init: Union[str, InitFn, None] = "xavier", **options: Any) -> None:
    """Apply the init plugin ``init`` (a name or a callable) to ``model`` in place."""
    if init is None:
        init = "xavier"
    fn = INITS.get(init) if isinstance(init, str) else init
    if not callable(fn):
        raise TypeError(f"init must be a registered name or a callable(model, **options), got {init!r}")
    params = inspect.signature(fn).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        valid = [n for n in list(params)[1:]]
        unknown = set(options) - set(valid)
        if unknown:
            raise unknown_kwargs_error(f"init {init!r}", unknown, valid)
    fn(model, **options)


__all__ = ["INITS", "InitFn", "apply_init", "list_inits", "register_init"]
