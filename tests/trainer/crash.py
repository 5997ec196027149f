"""A process killed right after it wrote its resume state, for the resume tests."""
from __future__ import annotations

from typing import Callable

import pytest

from zoo.trainer.resume import ResumeFile


class Crash(RuntimeError):
    """Raised by the patched :meth:`ResumeFile.save` once the state is on disk."""


def crash_after_save(mp: pytest.MonkeyPatch) -> Callable:
    """Patch ``ResumeFile.save`` to write, then raise :class:`Crash` naming the saved epoch; returns
    the real ``save`` so a test can put it back before resuming."""
    real_save = ResumeFile.save

    def save_then_crash(self, state):
        real_save(self, state)
        raise Crash(f"killed after saving epoch {state['next_epoch']}")

    mp.setattr(ResumeFile, "save", save_then_crash)
    return real_save
