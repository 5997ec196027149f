"""A process waiting for another's kernel build says so (the wait was silent)."""
from __future__ import annotations

import fcntl
import select
import subprocess
import sys
import textwrap

from tests.conftest import REPO


def test_waiting_for_the_build_lock_is_announced(tmp_path):
    directory = tmp_path / "build"
    lock = tmp_path / "build.zoo-lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code = textwrap.dedent(f"""
            from pathlib import Path
            from zoo.ops._compiled.build import _build_lock
            with _build_lock(Path({str(directory)!r})):
                print("got it")
        """)
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([proc.stderr], [], [], 60)  # said while the lock is still held here
        first = proc.stderr.readline() if ready else ""
        fcntl.flock(held, fcntl.LOCK_UN)
    out, _ = proc.communicate(timeout=60)
    assert "waiting for another process building the compiled attention kernels" in first
    assert out.strip() == "got it"
