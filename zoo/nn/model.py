"""The model protocol every family shares, whatever its base class (:class:`zoo.nn.DeepGNN` for
stacks of message-passing layers, :class:`zoo.nn.AttentionStack` for transformer-style blocks), and
the options a family's layers declare.

The zoo's tools (trainer, inits, diagnostics, suites) read a model only through
:class:`GraphModel`: its capability flags (class attributes, declared once here with their
defaults), ``num_layers``, ``taps`` (one ``nn.Identity`` per layer output, for hooks),
``skipped_layers`` (layer pruning), ``norm_plugin`` and ``forward(graph, x, return_attention=...)``.

A family's *own* options — those of its layers: the LeakyReLU slope of a GAT-style score, attention
dropout, GATv2's ``share_weights`` — are a frozen dataclass, :class:`LayerOptions`, which the
family names as ``options_class``.  The model stores them as ``model.options`` (validated once, in
the dataclass) and hands them to every layer it makes; ``zoo.build`` refuses an option the family
does not declare, naming the families that take it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Set, Type

from torch import nn

from zoo._names import check_options
from zoo.nn.validation import probability, real_number


@dataclass(frozen=True)
class LayerOptions:
    """The options of a family's layers: none here.  A family declares its own as a frozen dataclass
    subclass (fields with defaults; ``__post_init__`` validates them) and sets ``options_class``."""

    @classmethod
    def defaults(cls) -> Dict[str, Any]:
        """``{option: default}`` of every field."""
        return {f.name: f.default for f in fields(cls)}

    @classmethod
    def from_options(cls, owner: str, options: Mapping[str, Any]) -> "LayerOptions":
        """The options object of ``options``; an option the family does not take fails with one line."""
        check_options(owner, options, cls.defaults())
        return cls(**options)


@dataclass(frozen=True)
class AttentionOptions(LayerOptions):
    """Options of a layer with attention coefficients.

    Args:
        attn_dropout: dropout on attention coefficients.
    """

    attn_dropout: float = 0.0

    def __post_init__(self) -> None:
        probability("attn_dropout", self.attn_dropout)


@dataclass(frozen=True)
class LeakyScoreOptions(AttentionOptions):
    """Options of a GAT-style layer, whose attention score has a LeakyReLU inside.

    Args:
        negative_slope: LeakyReLU slope inside the attention score.
    """

    negative_slope: float = 0.2

    def __post_init__(self) -> None:
        super().__post_init__()
        real_number("negative_slope", self.negative_slope)


class GraphModel(nn.Module):
    """What the zoo's tools see of a model (see the module docstring).  Subclasses set the flags
    that differ from these defaults and call :meth:`_init_model` in their constructor."""

    #: family name shown in model cards; set by subclasses.
    family: str = ""
    #: the kind of the layers' attention score (:mod:`zoo.norms.scores`: ``"additive"``, ``"mlp"``,
    #: ``"dot_product"``), which decides the score norms the family accepts; ``None``: no attention scores.
    score_kind: Optional[str] = None
    #: ``None`` if the balance paper's conservation law holds for this family's layers,
    #: else the reason it does not (balanced inits then refuse to run).
    conservation_law_exception: Optional[str] = None
    #: models whose parameters are tied to one graph (GATDB's per-edge biases).
    graph_tied: bool = False
    #: whether each layer's coefficients into a node sum to 1 (False for GCN's symmetric weights).
    attention_normalized: bool = True
    #: whether ``heads`` > 1 is meaningful (False for attention-free families).
    supports_heads: bool = True
    #: whether the family's layers take edge features (``forward(graph, x, edge_attr)``).
    supports_edge_features: bool = False
    #: the self-loop policy of the family's graphs unless ``self_loops`` says otherwise.
    default_self_loops: str = "add"
    #: whether the forward runs under ``torch.func.vmap`` (replicas stacked into one call); ``False``:
    #: the trainer runs the replicas one at a time (the same numbers, no stacking)
    vmap_safe: bool = True
    #: scan node features for NaN/inf (once per tensor); ``zoo.build(..., check_inputs=False)`` turns it off.
    check_inputs: bool = True
    #: the dataclass of the family's layer options (:class:`LayerOptions`).
    options_class: ClassVar[Type[LayerOptions]] = LayerOptions

    num_layers: int
    taps: nn.ModuleList
    skipped_layers: Set[int]
    options: LayerOptions

    def _init_model(self, num_layers: int, options: Mapping[str, Any]) -> None:
        """The protocol's per-instance part: the layer options, one tap per layer, no skipped layer."""
        self.options = self.options_class.from_options(f"model {self.family or type(self).__name__!r}", options)
        self.num_layers = num_layers
        self.taps = nn.ModuleList(nn.Identity() for _ in range(num_layers))
        self.skipped_layers = set()

    def conservation_law_violations(self) -> List[str]:
        """Why the balance paper's conservation law does not hold for this model (empty if it does)."""
        return [self.conservation_law_exception] if self.conservation_law_exception else []


__all__ = ["AttentionOptions", "GraphModel", "LayerOptions", "LeakyScoreOptions"]
