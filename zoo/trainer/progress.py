"""A tqdm progress bar over a fit's epochs, as a callback (``zoo.fit(..., progress=True)``).

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
    """One bar per fit: epochs done, and the best validation metric of any replica so far."""

    def __init__(self, epochs: int, desc: str = "zoo.fit") -> None:
        self.epochs, self.desc = int(epochs), desc
        self.bar: Optional[Any] = None
        self.best = float("-inf")

    def on_epoch_end(self, state: Any) -> None:
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.epochs, desc=self.desc, unit="ep", leave=False, dynamic_ncols=True)
        self.bar.update(max(0, int(state.epoch) - self.bar.n))
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
