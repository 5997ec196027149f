"""The tuned allocator backs the tensors allocated afterwards with transparent huge pages (the heap
advised MADV_HUGEPAGE, a reserve grown untouched) unless ``ZOO_HUGE_PAGES=0``; the numbers do not
change.  Each case runs in a fresh process: the tuning is process-wide and once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not THP.exists() or "[never]" in THP.read_text(),
    reason="needs Linux with transparent huge pages (always or madvise)")

_PROBE = r"""
import json, torch
from zoo.trainer.allocator import tune_allocator
tuned = tune_allocator()
x = torch.ones(24 << 20)  # 96 MiB, allocated after the tuning
start = x.data_ptr()
huge, flagged = 0, False
with open("/proc/self/smaps") as fh:
    inside = False
    for line in fh:
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= start < hi
        elif inside and head == "AnonHugePages:":
            huge = int(line.split()[1])
        elif inside and head == "VmFlags:":
            flagged = "hg" in line.split()[1:]
print(json.dumps(dict(tuned=tuned, huge_kb=huge, flagged=flagged, total=float(x.sum()))))
"""


def _probe(**env: str) -> dict:
    root = Path(__file__).resolve().parents[2]
    full = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", **env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=full, cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tensors_after_the_tuning_sit_on_huge_pages():
    on = _probe()
    assert on["tuned"] and on["flagged"]
    assert on["huge_kb"] >= 2048  # at least one 2 MiB page under the tensor
    assert on["total"] == 24 << 20


def test_huge_pages_opt_out():
    off = _probe(ZOO_HUGE_PAGES="0")
    assert off["tuned"] and not off["flagged"] and off["huge_kb"] == 0
