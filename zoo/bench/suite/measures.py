"""What a suite can measure: the metrics and the run modes that produce them (declarations, torch-free).

The runner's modes (:mod:`zoo.bench.run.modes`) implement these declarations; the leaderboard,
findings, HTML and report read a metric's properties from here instead of testing its name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from zoo._names import unknown_name_error


@dataclass(frozen=True)
class Metric:
    """One number a run records under ``metrics[name]``.

    ``percent``: a fraction shown as a percentage (the board multiplies by its ``scale``);
    ``geometric``: log-normal over seeds (geometric mean, compared with the paper in log10);
    ``per_layer``: the record holds ``{layer: value}`` — the layer is the board's column and a
    reported number names it as ``layer``; ``selected``: read at a selected epoch, so
    epochs-to-best means something.
    """

    name: str
    description: str
    percent: bool = False
    geometric: bool = False
    per_layer: bool = False
    selected: bool = True


@dataclass(frozen=True)
class ModeSpec:
    """A suite's ``mode``: the metrics its runs record, whether it runs the training protocol, and
    whether it measures one graph (``one_graph``: a suite of this mode is refused on a dataset
    that is not transductive, when it is read rather than when a group runs)."""

    name: str
    metrics: Tuple[str, ...]
    trains: bool = True
    one_graph: bool = False


_ACCURACY = "accuracy at the selected state"
METRIC_SPECS: Dict[str, Metric] = {m.name: m for m in (
    Metric("train", f"training {_ACCURACY}", percent=True),
    Metric("val", f"validation {_ACCURACY}", percent=True),
    Metric("test", f"test {_ACCURACY}", percent=True),
    Metric("laplacian_energy", "Laplacian energy of the last layer's output at initialisation", geometric=True,
           selected=False),
    Metric("pruned", "test accuracy of the best state with one layer skipped", percent=True, per_layer=True,
           selected=False),
    Metric("self_attention", "mean over layers, nodes and heads of the self-attention alpha_vv at the last state",
           selected=False),
    Metric("effective_rank", "effective rank (Roy & Vetterli) of the last layer's output at initialisation",
           selected=False),
    Metric("equal_rows_distance", "relative distance of the last layer's output to equal rows (every node the "
           "same vector) at initialisation", geometric=True, selected=False),
)}
MODE_SPECS: Dict[str, ModeSpec] = {m.name: m for m in (
    ModeSpec("train", ("train", "val", "test")),
    ModeSpec("energy_at_init", ("laplacian_energy",), trains=False),
    ModeSpec("rank_at_init", ("effective_rank", "equal_rows_distance"), trains=False, one_graph=True),
    ModeSpec("prune_layers", ("train", "val", "test", "pruned")),
    ModeSpec("train_attention", ("train", "val", "test", "self_attention")),
)}
MODES: Tuple[str, ...] = tuple(MODE_SPECS)
METRICS: Tuple[str, ...] = tuple(METRIC_SPECS)


def metric_spec(name: str) -> Metric:
    """The declaration of metric ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    try:
        return METRIC_SPECS[name]
    except KeyError:
        raise unknown_name_error("metric", name, METRICS) from None


def mode_spec(name: str) -> ModeSpec:
    """The declaration of mode ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    try:
        return MODE_SPECS[name]
    except KeyError:
        raise unknown_name_error("mode", name, MODES) from None
