"""Output heads: what turns the last message-passing layer's output into the model's output.

``classifier="none"`` (default): the last layer is the classifier (its heads averaged, ``out_dim``
wide).  Any other registered head makes all ``num_layers`` layers hidden layers (heads
concatenated, ``hidden_dim`` wide, no activation after the last) and the head maps
``hidden_dim`` to ``out_dim``.  A head is a factory ``(in_dim, out_dim) -> nn.Module``;
paper-specific heads are registered by :mod:`zoo.papers`.
"""
from __future__ import annotations

from typing import Callable, Optional

from torch import nn

from zoo._names import Registry

ClassifierFactory = Callable[[int, int], Optional[nn.Module]]
#: :mod:`zoo.papers` registers one paper's heads here: imported before the first lookup
CLASSIFIERS: Registry[ClassifierFactory] = Registry("classifier", populate=("zoo.papers",))
CLASSIFIERS.add("none", lambda in_dim, out_dim: None)


def register_classifier(name: str, aliases: tuple = ()) -> Callable[[ClassifierFactory], ClassifierFactory]:
    """Decorator registering an output head factory under ``name``."""

    def decorator(factory: ClassifierFactory) -> ClassifierFactory:
        CLASSIFIERS.add(name, factory, aliases)
        return factory

    return decorator


def make_classifier(name: str, in_dim: int, out_dim: int) -> Optional[nn.Module]:
    """The head ``name`` mapping ``(N, in_dim)`` to ``(N, out_dim)`` (``None`` for ``"none"``)."""
    return CLASSIFIERS.create(name, in_dim, out_dim)


__all__ = ["CLASSIFIERS", "ClassifierFactory", "make_classifier", "register_classifier"]
