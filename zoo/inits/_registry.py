"""The init registry: a leaf module the plugin modules import (never the package ``zoo.inits``,
whose ``__init__`` imports them).  Public names are re-exported by :mod:`zoo.inits`."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

from torch import nn

from zoo._names import Registry, accepted_options, check_options, widened_options

InitFn = Callable[..., None]
#: ``check(model, **options) -> reasons``: why the init cannot be applied to ``model`` (empty: it can)
InitCheck = Callable[..., List[str]]
INITS: Registry[InitFn] = Registry("init", populate=("zoo.inits",))
_CHECKS: Dict[str, InitCheck] = {}


def register_init(name: str, aliases: tuple = (), check: Optional[InitCheck] = None) -> Callable[[InitFn], InitFn]:
    """Decorator registering an init function under ``name`` (and ``aliases``).

    ``check(model, **options)`` (optional) returns why the init does not apply to a built model
    (e.g. a balanced init on a model whose conservation law does not hold); suites, ``zoo.fit`` and
    ``zoo diagnose`` call it through :func:`init_incompatibility` before training anything."""

    def decorator(fn: InitFn) -> InitFn:
        INITS.add(name, fn, aliases)
        _CHECKS.pop(INITS.canonical(name), None)  # a re-registered init keeps no stale check
        if check is not None:
            _CHECKS[INITS.canonical(name)] = check
        return fn

    return decorator


def has_check(init: str) -> bool:
    """Whether init ``init`` declares a compatibility check."""
    return INITS.canonical(init) in _CHECKS


def init_incompatibility(model: nn.Module, init: str, **options: Any) -> Optional[str]:
    """Why init ``init`` (a registered name) with ``options`` cannot be applied to ``model``;
    ``None`` when it can (or the init declares no check)."""
    check = _CHECKS.get(INITS.canonical(init))
    reasons = list(check(model, **options)) if check is not None else []
    return "; ".join(reasons) or None


def list_inits() -> List[str]:
    return INITS.names()


def apply_init(model: nn.Module, init: Union[str, InitFn, None] = "xavier", **options: Any) -> None:
    """Apply the init plugin ``init`` (a name or a callable) to ``model`` in place."""
    if init is None:
        init = "xavier"
    if isinstance(init, str):
        INITS.create(init, model, **options)
        return
    if not callable(init):
        raise TypeError(f"init must be a registered name or a callable(model, **options), got {init!r}")
    check_options(f"init {getattr(init, '__name__', init)!r}", options, accepted_options(init, 1),
                  widened_options(init, 1))
    init(model, **options)


__all__ = ["INITS", "InitCheck", "InitFn", "apply_init", "has_check", "init_incompatibility", "list_inits", "register_init"]
