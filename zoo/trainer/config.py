"""The training-config schema (torch-free): what a suite's trainer keys mean and which values are valid.

:class:`TrainConfig` is a plain dataclass checked on construction; the trainer
(:mod:`zoo.trainer.loop`) consumes it.  The optimiser and scheduler *names* and the plateau
schedulers' options live here too, so a suite can be validated without importing torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from zoo._names import normalize_name, unknown_name_error

OPTIMIZERS = ("sgd", "adam", "adamw")
#: ``plateau`` reads the validation loss; the others are functions of the epoch (:mod:`zoo.trainer.schedules`)
LR_SCHEDULERS = ("none", "plateau", "step", "multistep", "exponential", "cosine")
#: ``precision``: ``fp32`` (the model's own dtype throughout) or ``bf16`` (forward under bfloat16 autocast)
PRECISIONS = ("fp32", "bf16")
#: ``torch.optim.lr_scheduler.ReduceLROnPlateau``'s defaults (mode "min": the monitored value is a loss).
PLATEAU_DEFAULTS: Dict[str, Any] = {"factor": 0.1, "patience": 10, "threshold": 1e-4, "threshold_mode": "rel",
                                    "cooldown": 0, "min_lr": 0.0, "eps": 1e-8}


def plateau_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """``ReduceLROnPlateau``'s options (torch defaults filled in), checked; bad ones raise ``ValueError``."""
    unknown = sorted(set(options) - set(PLATEAU_DEFAULTS))
    if unknown:
        raise ValueError(f"lr_scheduler 'plateau' has no option(s) {', '.join(map(repr, unknown))}; "
                         f"its options (torch ReduceLROnPlateau, mode 'min'): {', '.join(PLATEAU_DEFAULTS)}")
    opts = {**PLATEAU_DEFAULTS, **options}
    for name in ("factor", "threshold", "min_lr", "eps"):
        v = opts[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v == math.inf:
            raise ValueError(f"lr_scheduler 'plateau': {name} must be a finite number >= 0, got {v!r}")
    if not opts["factor"] < 1.0:
        raise ValueError(f"lr_scheduler 'plateau': factor must be < 1 (the lr is multiplied by it), got {opts['factor']!r}")
    for name in ("patience", "cooldown"):
        v = opts[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"lr_scheduler 'plateau': {name} must be an integer >= 0, got {v!r}")
    if opts["threshold_mode"] not in ("rel", "abs"):
        raise ValueError(f"lr_scheduler 'plateau': threshold_mode must be 'rel' or 'abs', got {opts['threshold_mode']!r}")
    return opts


#: the epoch schedules' options: ``None`` marks a required one (``cosine``'s ``T_max`` defaults to ``epochs``)
EPOCH_SCHEDULE_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "step": {"step_size": None, "gamma": 0.1},
    "multistep": {"milestones": None, "gamma": 0.1},
    "exponential": {"gamma": None},
    "cosine": {"T_max": None, "eta_min": 0.0},
}


def epoch_schedule_options(name: str, options: Mapping[str, Any]) -> Dict[str, Any]:
    """An epoch schedule's options (torch's names and defaults), checked; bad ones raise ``ValueError``."""
    defaults = EPOCH_SCHEDULE_DEFAULTS[name]
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"lr_scheduler {name!r} has no option(s) {', '.join(map(repr, unknown))}; "
                         f"its options: {', '.join(defaults)}")
    opts = {**defaults, **options}
    missing = [k for k, v in opts.items() if v is None and not (name == "cosine" and k == "T_max")]
    if missing:
        raise ValueError(f"lr_scheduler {name!r} needs {', '.join(missing)} in lr_scheduler_kwargs, "
                         f"e.g. lr_scheduler_kwargs = {{{missing[0]} = {_EXAMPLES[missing[0]]}}}")

    def positive_int(key: str, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"lr_scheduler {name!r}: {key} must be an integer >= 1, got {v!r}")

    for key, v in opts.items():
        if key in ("step_size", "T_max"):
            if v is not None:  # T_max unset: the run's epochs
                positive_int(key, v)
        elif key == "milestones":
            if not isinstance(v, (list, tuple)) or not v:
                raise ValueError(f"lr_scheduler 'multistep': milestones must be a list of epochs, got {v!r}")
            for m in v:
                positive_int("each milestone", m)
            opts[key] = sorted(v)
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise ValueError(f"lr_scheduler {name!r}: {key} must be a finite number >= 0, got {v!r}")
    if "gamma" in opts and not 0 < opts["gamma"] <= 1:
        raise ValueError(f"lr_scheduler {name!r}: gamma must be in (0, 1] (the lr is multiplied by it), "
                         f"got {opts['gamma']!r}")
    return opts


_EXAMPLES = {"step_size": 50, "milestones": "[100, 150]", "gamma": 0.95}


#: the default ``check_every`` on a GPU: a host read there drains the device queue, while each epoch
#: run past the last replica's stop costs one epoch (half of it on average, ``(K - 1) / 2`` epochs,
#: once per group)
CHECK_EVERY = 25

#: ``cuda_graphs``: ``auto`` captures the epoch on a CUDA device where the task allows it (else
#: eager, and a failed capture falls back to eager with one warning), ``on`` requires it (an error
#: where it cannot be), ``off`` never captures (:mod:`zoo.trainer.graphs`).
CUDA_GRAPHS = ("auto", "on", "off")

SPLITS = ("train", "val", "test")
SELECT = ("val_metric", "val_loss", "train_metric", "last")


@dataclass
class TrainConfig:
    """How to train (every field but ``check_every`` and ``cuda_graphs`` is a suite key; see
    ``docs/benchmarks.md``)."""

    optimizer: str = "adam"
    lr: float = 0.005
    weight_decay: float = 0.0
    momentum: float = 0.0
    betas: Tuple[float, float] = (0.9, 0.999)
    warmup_epochs: int = 0
    epochs: int = 200
    patience: Optional[int] = None
    loss_threshold: float = 1e-4
    select: str = "val_metric"        # "val_metric" | "val_loss" | "train_metric" (fit studies) | "last"
    select_ties: str = "first"        # "first" | "last": which of several epochs with the best score is kept
    patience_on: str = "select"       # "select" | "either": reset patience when val loss OR metric improves
    batch_size: int = 0               # graphs per mini-batch (inductive/graph tasks); 0 = all
    data_seed: int = 0
    keep_best_state: bool = False     # keep each replica's best parameters (layer pruning needs them)
    lr_scheduler: str = "none"        # "none" | "plateau" (ReduceLROnPlateau on the validation loss)
    lr_scheduler_kwargs: Dict[str, Any] = field(default_factory=dict)  # e.g. {"factor": 0.1, "patience": 10}
    #: clip each replica's gradient to this global 2-norm (over its own parameters), as
    #: ``torch.nn.utils.clip_grad_norm_`` on that replica alone; ``None``: no clipping
    grad_clip_norm: Optional[float] = None
    #: ``"fp32"``: the model's dtype throughout; ``"bf16"``: every forward under bfloat16 autocast
    #: (losses, gradients' accumulation into the parameters and the optimiser stay in the model's dtype)
    precision: str = "fp32"
    #: ``True``: the run computes with subnormal numbers flushed to zero on the CPU (FTZ and DAZ in its
    #: training threads; :mod:`zoo.trainer.subnormals`), for the runs whose decayed weights would
    #: otherwise take a slow path in every product; ``False``: kept (IEEE arithmetic)
    flush_subnormals: bool = False
    #: epochs between the host's reads of the stop flags (the loop's only device-to-host reads while
    #: no callback reads the host); ``None``: every epoch on the CPU, where a read waits for nothing
    #: and a run then ends at its last stop, and :data:`CHECK_EVERY` on other devices.  No number
    #: depends on it, so it is not part of a suite cell.
    check_every: Optional[int] = None
    #: replay the epoch as CUDA graphs: ``"auto"`` | ``"on"`` | ``"off"`` (:data:`CUDA_GRAPHS`).  The
    #: replayed kernels are the eager ones, so no number depends on it either: not part of a suite cell.
    cuda_graphs: str = "auto"

    def __post_init__(self) -> None:
        _check_values(self)
        if self.select not in SELECT:
            raise ValueError(f"select must be one of {SELECT}, got {self.select!r}")
        if self.select_ties not in ("first", "last"):
            raise ValueError(f"select_ties must be 'first' or 'last', got {self.select_ties!r}")
        if self.patience_on not in ("select", "either"):
            raise ValueError(f"patience_on must be 'select' or 'either', got {self.patience_on!r}")
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 (or unset), got {self.patience}")
        if not isinstance(self.lr_scheduler, str) or not isinstance(self.lr_scheduler_kwargs, dict):
            raise ValueError(f"lr_scheduler must be a name and lr_scheduler_kwargs a table, got "
                             f"{self.lr_scheduler!r} and {self.lr_scheduler_kwargs!r}")
        check_lr_scheduler(self.lr_scheduler, self.lr_scheduler_kwargs)  # bad settings fail here
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {self.precision!r}")


def _check_values(cfg: "TrainConfig") -> None:
    """Types and ranges of the numeric fields (bools are not numbers; NaN is never valid)."""
    def number(name: str, low: float, integer: bool = False, strict: bool = False) -> None:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int if integer else (int, float)) or v != v:
            raise ValueError(f"{name} must be {'an integer' if integer else 'a number'}, got {v!r}")
        if v < low or (strict and v == low) or v == math.inf:
            raise ValueError(f"{name} must be {'>' if strict else '>='} {low}"
                             f"{'' if integer else ' (and finite)'}, got {v!r}")

    number("lr", 0, strict=True)
    number("weight_decay", 0)
    number("momentum", 0)
    if cfg.grad_clip_norm is not None:  # None = no clipping
        number("grad_clip_norm", 0, strict=True)
    for name in ("warmup_epochs", "epochs", "batch_size"):
        number(name, 0, integer=True)
    if cfg.check_every is not None:
        number("check_every", 1, integer=True)
    if not isinstance(cfg.flush_subnormals, bool):
        raise ValueError(f"flush_subnormals must be true or false, got {cfg.flush_subnormals!r}")
    if cfg.cuda_graphs not in CUDA_GRAPHS:
        raise ValueError(f"cuda_graphs must be one of {', '.join(CUDA_GRAPHS)}, got {cfg.cuda_graphs!r}")
    number("data_seed", -math.inf, integer=True)
    if cfg.patience is not None:  # None = no patience
        number("patience", 1, integer=True)
    if isinstance(cfg.loss_threshold, bool) or not isinstance(cfg.loss_threshold, (int, float)) \
            or cfg.loss_threshold != cfg.loss_threshold:
        raise ValueError(f"loss_threshold must be a number, got {cfg.loss_threshold!r}")
    betas = cfg.betas
    if (not isinstance(betas, (tuple, list)) or len(betas) != 2
            or any(isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 <= b < 1.0 for b in betas)):
        raise ValueError(f"betas must be two numbers in [0, 1) (beta1, beta2), e.g. [0.9, 0.999]; got {betas!r}")


def check_lr_scheduler(name: str, options: Optional[Mapping[str, Any]] = None) -> None:
    """Raise ``ValueError`` if ``name`` / ``options`` do not describe a valid stacked scheduler."""
    key = normalize_name(name)
    if key == "none":
        if options:
            raise ValueError(f"lr_scheduler_kwargs {dict(options)!r} given without an lr_scheduler; "
                             "set an lr_scheduler (e.g. \"step\") or drop them")
        return
    if key == "plateau":
        plateau_options(dict(options or {}))
        return
    if key in EPOCH_SCHEDULE_DEFAULTS:
        epoch_schedule_options(key, dict(options or {}))
        return
    raise unknown_name_error("lr_scheduler", name, LR_SCHEDULERS)
