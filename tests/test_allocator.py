"""The tuned allocator never gives the heap's free top back, however large.  Once the compiled
attention meets values larger than the cache budget, it backs the tensors allocated afterwards with
transparent huge pages (the heap advised MADV_HUGEPAGE, a reserve grown untouched), unless
``ZOO_HUGE_PAGES=0``; smaller graphs, or an untuned allocator, keep 4 KiB pages.  Each case runs in a
fresh process: the tuning is process-wide and once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.ops._compiled import ops

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

_NEEDS_THP = pytest.mark.skipif(not sys.platform.startswith("linux") or not THP.exists()
                                or "[never]" in THP.read_text(),
                                reason="needs Linux with transparent huge pages (always or madvise)")
_NEEDS_KERNELS = pytest.mark.skipif(not ops.available(torch.device("cpu")),
                                    reason="the C++ attention kernels could not be built here (no compiler?)")

_TRIM_PROBE = r"""
import ctypes, json
from zoo._allocator import tune_allocator
tuned = tune_allocator()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
block = libc.malloc((2 << 30) + (64 << 20))  # above any int threshold; address space only, never touched
top = libc.sbrk(0)
libc.free(block)
print(json.dumps(dict(tuned=tuned, allocated=bool(block), kept=libc.sbrk(0) == top)))
"""

_PROBE = r"""
import json, sys, torch
from zoo.ops._compiled import ops
from zoo._allocator import tune_allocator
tuned = tune_allocator() if sys.argv[1] == "tune" else False
nodes = int(sys.argv[2])  # one head of 8 channels: 32 B a node
assert ops.available(torch.device("cpu"))
edge_index = torch.stack([torch.arange(nodes), torch.arange(nodes)])
from zoo.ops.aggregate import edge_orders
graph = ops.graph_arguments(edge_orders(edge_index[0], edge_index[1], nodes), triton=False)
h = torch.randn(nodes, 1, 8)
out, _ = ops.gatv2_attention(h, h, h, torch.randn(1, 8), 0.2, graph)
assert torch.allclose(out, h)  # a self-loop only: alpha = 1
x = torch.ones(24 << 20)  # 96 MiB, allocated after the call
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


def _probe(tune: bool = True, nodes: int = 1 << 17, **env: str) -> dict:
    root = Path(__file__).resolve().parents[1]
    full = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", **env)
    out = subprocess.run([sys.executable, "-c", _PROBE, "tune" if tune else "plain", str(nodes)], env=full, cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_the_heap_top_is_never_given_back():
    """A free heap top above 2 GiB stays (a finite trim threshold gave it back, and an epoch freeing
    that much faulted it in again every epoch)."""
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", _TRIM_PROBE], env=dict(os.environ, PYTHONPATH=str(root)), cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not (got["tuned"] and got["allocated"]):
        pytest.skip("not glibc, or no 2 GiB of address space for the heap")
    assert got["kept"]


@_NEEDS_THP
@_NEEDS_KERNELS
def test_tensors_after_a_large_attention_call_sit_on_huge_pages():
    from zoo.ops._compiled import rules

    assert (1 << 17) * 32 > rules.FOLD_MAX_BYTES  # 4 MiB of values
    on = _probe()
    assert on["tuned"] and on["flagged"]
    assert on["huge_kb"] >= 2048  # at least one 2 MiB page under the tensor
    assert on["total"] == 24 << 20


@_NEEDS_THP
@_NEEDS_KERNELS
@pytest.mark.parametrize("case", ["opt_out", "small_graph", "untuned"])
def test_4k_pages_otherwise(case):
    off = _probe(**dict(opt_out=dict(ZOO_HUGE_PAGES="0"), small_graph=dict(nodes=1 << 12),
                        untuned=dict(tune=False))[case])
    assert off["tuned"] == (case != "untuned")
    assert not off["flagged"] and off["huge_kb"] == 0
