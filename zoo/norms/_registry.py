"""The norm registry: a leaf module the plugin modules import (never the package ``zoo.norms``,
whose ``__init__`` imports them).  Public names are re-exported by :mod:`zoo.norms`."""
from __future__ import annotations

from typing import Any, Callable, List, Protocol, Union, runtime_checkable

from torch import nn

from zoo._names import Registry, unknown_kwargs_error

NORMS: Registry[Callable[..., "NormPlugin"]] = Registry("norm")


@runtime_checkable
class NormPlugin(Protocol):
    """Contract of a normalisation plugin (see the module docstring)."""

    name: str
    kind: str  # "features" | "scores" | "none"
    placement: str  # "pre" | "post" | "post_activation" (features); ignored otherwise

    def make(self, dim: int) -> nn.Module:
        """A fresh feature-norm module for representations of width ``dim`` (kind ``features``)."""


NormFactory = Callable[..., NormPlugin]


def register_norm(name: str, aliases: tuple = ()) -> Callable[[NormFactory], NormFactory]:
    """Decorator registering a plugin factory (a class or function taking the plugin's options)."""

    def decorator(factory: NormFactory) -> NormFactory:
        NORMS.add(name, factory, aliases)
        return factory

    return decorator


@register_norm("none", aliases=("identity",))
class NoNorm:
    """No normalisation."""

    name = "none"
    kind = "none"
    placement = "post"

    def make(self, dim: int) -> nn.Module:
        return nn.Identity()


def resolve_norm(norm: Union[None, str, NormPlugin], **options: Any) -> NormPlugin:
    """Turn a name (or ``None``, or an existing plugin object) into a plugin object."""
    if norm is None:
        norm = "none"
    if not isinstance(norm, str):
        if options:
            raise TypeError("norm_kwargs can only be given together with a norm *name*")
        if not isinstance(norm, NormPlugin):
            raise TypeError(f"norm must be a name or a NormPlugin (name, kind, placement, make), got {norm!r}")
        return norm
    factory = NORMS.get(norm)
    try:
        import inspect

        sig = inspect.signature(factory)
        valid = [p for p in sig.parameters if p != "self"]
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - builtins
        valid, accepts_any = [], True
    unknown = set(options) - set(valid)
    if unknown and not accepts_any:
        raise unknown_kwargs_error(f"norm {NORMS.canonical(norm)!r}", unknown, valid)
    return factory(**options)


def list_norms() -> List[str]:
    return NORMS.names()


__all__ = ["NORMS", "NoNorm", "NormFactory", "NormPlugin", "list_norms", "register_norm", "resolve_norm"]
