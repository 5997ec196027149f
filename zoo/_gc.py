"""Python's garbage collector over the ``zoo`` command's start-up.

Before its first group trains, a ``zoo`` process imports torch, PyG and the zoo, reads the suite and
loads the data: some 230 000 objects that live to the end of the process.  While they are made the
collector runs hundreds of young-generation passes and several full ones over them, and frees
almost nothing (its cost: docs/notes/performance.md).  The command
pauses the collector for its start-up (:func:`pause_for_startup`, only for the ``zoo`` command
itself, not for a caller of ``zoo.cli.main`` in its own process) and the first group ends it
(:func:`end_startup`): what the start-up made is frozen (the permanent generation, never walked
again) and the collector runs as before, so the training loop's own garbage cycles (pytree
closures: a few hundred small objects an epoch, no tensors) are collected as they were.
"""
from __future__ import annotations

import gc

_paused = False


def pause_for_startup() -> None:
    """Stop automatic collection until :func:`end_startup` (a no-op when it is already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def end_startup() -> None:
    """Freeze the objects made so far and restart automatic collection, if :func:`pause_for_startup`
    stopped it; later calls do nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def paused() -> bool:
    """Whether the start-up pause is in effect."""
    return _paused
