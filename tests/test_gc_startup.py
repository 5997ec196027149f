"""The ``zoo`` command's start-up runs without the garbage collector, and the first group turns it back on."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from typing import Iterator

import pytest

import zoo._gc as startup_gc


@pytest.fixture
def collector() -> Iterator[None]:
    """Each test starts with the collector on and no pause, and leaves them so."""
    was = gc.isenabled()
    gc.enable()
    startup_gc._paused = False
    yield
    startup_gc._paused = False
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


def test_pause_then_end(collector: None) -> None:
    startup_gc.pause_for_startup()
    assert not gc.isenabled() and startup_gc.paused()
    startup_gc.end_startup()
    assert gc.isenabled() and not startup_gc.paused()
    assert gc.get_freeze_count() > 0  # what the start-up made is never walked again
    startup_gc.end_startup()  # once only
    assert gc.isenabled()


def test_end_without_pause_changes_nothing(collector: None) -> None:
    gc.disable()  # the caller's own choice is not overridden
    startup_gc.end_startup()
    assert not gc.isenabled()
    gc.enable()
    before = gc.get_freeze_count()
    startup_gc.end_startup()
    assert gc.isenabled() and gc.get_freeze_count() == before


def test_pause_keeps_a_collector_that_was_off_off(collector: None) -> None:
    gc.disable()
    startup_gc.pause_for_startup()
    assert not startup_gc.paused()
    startup_gc.end_startup()
    assert not gc.isenabled()


def test_main_in_a_callers_process_does_not_pause(collector: None) -> None:
    from zoo.cli import main

    assert main(["list", "inits"]) == 0
    assert gc.isenabled() and not startup_gc.paused()


def test_the_command_trains_with_the_collector_on(tmp_path, mirror) -> None:
    """``python -m zoo train``: paused at start-up, on again from the group's build (a training loop's
    garbage cycles are collected), and the start-up's objects frozen."""
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        import gc, sys
        import zoo.trainer.loop as loop
        seen = []
        original = loop.train_replicas
        def spy(*args, **kwargs):
            seen.append((gc.isenabled(), gc.get_freeze_count() > 0))
            return original(*args, **kwargs)
        loop.train_replicas = spy
        import zoo.trainer.cells as cells
        cells.train_replicas = spy
        import atexit
        atexit.register(lambda: print("TRAINING_GC", seen, file=sys.stderr))
        sys.argv = ["zoo", "train", "--model", "gcn", "--dataset", "cornell", "--num-layers", "2",
                    "--epochs", "2", "--seeds", "0", "--device", "cpu", "--out", sys.argv[1]]
        from zoo.cli import main
        main()
    """))
    env = dict(os.environ, ZOO_DATA_MIRROR=str(mirror))
    out = subprocess.run([sys.executable, str(probe), str(tmp_path / "out")], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert "TRAINING_GC [(True, True)]" in out.stderr, out.stderr[-3000:]
