"""The progress bar over a training run's epochs: a callback, for ``zoo.fit`` and ``zoo bench`` alike.

``zoo.fit(..., progress=True)`` adds one bar per fit (with the best validation metric so far);
the runner's in-process executor adds one per group (``zoo bench``: its label names the group).
``progress=None`` (the default of ``zoo.fit`` / ``zoo.diagnose``) shows it only where someone
watches: a terminal on stderr or a notebook kernel; a script writing to a log file gets nothing
(tqdm's redraws would fill it with escapes).
"""
from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["ProgressBar", "interactive"]


def interactive() -> bool:
    """stderr is a terminal, or this runs in a Jupyter / IPython kernel."""
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


class ProgressBar:
    """A tqdm bar of ``epochs`` epochs, drawn at the first evaluated epoch (a run that fails before
    training leaves no stray line) and advanced to each state's epoch (a resumed run starts where it
    was).  ``show_best``: the best validation metric of any replica so far, which reads the device
    every epoch; without it the bar reads nothing (``syncs_host = False``).  ``only_terminal``: draw
    nothing unless stderr is a terminal (a runner's log)."""

    def __init__(self, epochs: int, desc: str = "zoo.fit", show_best: bool = True,
                 only_terminal: bool = False) -> None:
        self.epochs, self.desc = int(epochs), desc
        self.syncs_host = show_best
        self.only_terminal = only_terminal
        self.bar: Optional[Any] = None
        self.best = float("-inf")

    def on_epoch_end(self, state: Any) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            # disable=None: tqdm's own test, no bar unless stderr is a terminal
            self.bar = tqdm(total=self.epochs, desc=self.desc, unit="ep", leave=False, dynamic_ncols=True,
                            disable=None if self.only_terminal else False)
        self.bar.update(max(0, int(state.epoch) - self.bar.n))
        if not self.syncs_host:
            return
        val = state.metrics.get("val")
        if val is not None and val.numel():
            self.best = max(self.best, float(val.max()))
            self.bar.set_postfix(best_val=f"{self.best:.4f}", refresh=False)

    def on_fit_end(self, state: Any) -> None:
        self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
