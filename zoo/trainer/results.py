"""What one replica's training produced (:class:`RunResult`), read from the loop's final state."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from torch import Tensor

from zoo.trainer.config import SPLITS
from zoo.trainer.state import LoopState


@dataclass
class RunResult:
    """What one replica's training produced (metrics at the best validation epoch)."""

    metrics: Dict[str, Optional[float]]
    val_loss: Optional[float]
    train_loss: Optional[float]
    best_epoch: Optional[int]
    epochs_run: int
    stop_reason: str
    diverged: bool
    diverged_epoch: Optional[int]
    wall_time_s: float
    time_per_epoch_s: float
    num_parameters: int
    best_state: Optional[Dict[str, Tensor]] = field(default=None, repr=False)
    extra: Dict[str, Any] = field(default_factory=dict)


def _finite(value: float, has_best: bool) -> Optional[float]:
    return value if has_best and math.isfinite(value) else None


def run_results(state: LoopState, replicas: Any, last_epoch: int, elapsed: float, scheduler: Any,
                extra: Dict[str, Any]) -> List[RunResult]:
    """One :class:`RunResult` per replica from the final ``state`` (reads the device once);
    ``last_epoch``: the last state the loop evaluated (it may have run past the last replica's
    stop, up to its next host check: the run's epochs are those up to that stop);
    ``extra``: entries of every replica's ``extra``: how the epochs ran (``cuda_graphs``), and those of a
    resumed run (``resumed_at_epoch``, ``resumed_elapsed_s``)."""
    n_params = replicas.num_parameters()
    be, de, se = state.best_epoch.tolist(), state.diverged_epoch.tolist(), state.stop_epoch.tolist()
    epochs_done = max(se) if se and min(se) >= 0 else last_epoch
    per_epoch = elapsed / max(last_epoch + 1, 1)  # the epochs the loop ran, its tail past the last stop included
    bm, bl, reasons = state.best_metrics.tolist(), state.best_losses.tolist(), state.reasons()
    results = []
    for r in range(replicas.size):
        has_best = be[r] >= 0
        results.append(RunResult(
            metrics={s: _finite(bm[r][i], has_best) for i, s in enumerate(SPLITS)},
            val_loss=_finite(bl[r][1], has_best),
            train_loss=_finite(bl[r][0], has_best),
            best_epoch=be[r] if has_best else None,
            epochs_run=se[r] if se[r] >= 0 else epochs_done,
            stop_reason=reasons[r] or "max_epochs",
            diverged=de[r] >= 0,
            diverged_epoch=de[r] if de[r] >= 0 else None,
            wall_time_s=elapsed,
            time_per_epoch_s=per_epoch,
            num_parameters=n_params,
            best_state=replicas.state_of(r, state.best_state) if state.best_state is not None else None,
            # the learning rate of the replica's last optimisation step (scheduled runs only)
            extra={**({"last_step_lr": float(scheduler.lr[r])} if scheduler is not None else {}), **extra},
        ))
    return results
