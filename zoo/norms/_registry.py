"""The norm registry: a leaf module the plugin modules import (never the package ``zoo.norms``,
whose ``__init__`` imports them).  Public names are re-exported by :mod:`zoo.norms`."""
from __future__ import annotations

from typing import Any, Callable, List, Union

from zoo._names import Registry
from zoo.norms.features import FeatureNorm
from zoo.norms.scores import ScoreNorm

#: a norm plugin object: a feature norm, a score norm, or no norm
NormPlugin = Union[FeatureNorm, ScoreNorm, "NoNorm"]
NormFactory = Callable[..., NormPlugin]
NORMS: Registry[NormFactory] = Registry("norm", populate=("zoo.norms",))


def register_norm(name: str, aliases: tuple = ()) -> Callable[[NormFactory], NormFactory]:
    """Decorator registering a plugin factory (a class or function taking the plugin's options) that
    makes a :class:`FeatureNorm` or a :class:`ScoreNorm`."""

    def decorator(factory: NormFactory) -> NormFactory:
        NORMS.add(name, factory, aliases)
        return factory

    return decorator


@register_norm("none", aliases=("identity",))
class NoNorm:
    """No normalisation: neither a feature norm nor a score norm."""

    name = "none"

    def __repr__(self) -> str:
        return "NoNorm()"


def resolve_norm(norm: Union[None, str, NormPlugin], **options: Any) -> NormPlugin:
    """Turn a name (or ``None``, or an existing plugin object) into a plugin object."""
    if norm is None:
        norm = "none"
    if isinstance(norm, str):
        plugin = NORMS.create(norm, **options)
    elif options:
        raise TypeError("norm_kwargs can only be given together with a norm *name*")
    else:
        plugin = norm
    feature, score = isinstance(plugin, FeatureNorm), isinstance(plugin, ScoreNorm)
    if feature and score:
        raise TypeError(f"norm {plugin.name!r} is both a FeatureNorm (placement, make) and a ScoreNorm (score_kinds, "
                        "normalize); a norm acts on representations or on attention scores, not both")
    if not (feature or score or isinstance(plugin, NoNorm)):
        raise TypeError(f"norm must be a name, a zoo.norms.FeatureNorm (name, placement, make(dim)) or a "
                        f"zoo.norms.ScoreNorm (name, score_kinds, normalize(scores)), got {plugin!r}")
    return plugin


def list_norms() -> List[str]:
    return NORMS.names()


__all__ = ["NORMS", "NoNorm", "NormFactory", "NormPlugin", "list_norms", "register_norm", "resolve_norm"]
