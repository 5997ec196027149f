"""``flush_subnormals``: a run's floating-point mode for subnormal numbers on the CPU, set for the run
and put back after it.

Weight decay drives the parameters that no gradient pulls on towards zero; under Adam they and
their first moments end in the subnormal range (below 1.18e-38 in float32), and x86 cores take a
microcode assist for each subnormal operand, which makes a long run's later epochs several times
slower.  With ``flush_subnormals = True`` the training thread computes with FTZ and DAZ set
(``torch.set_flush_denormal``): a subnormal result is written as zero and a subnormal operand read as
zero.  That changes the subnormal values and the tiny normal ones computed from them (Adam divides
a first moment by ``sqrt(v) + eps``: a gain of at most ``lr / eps``); they reach a normal-sized result
only where every term of it is that small (docs/notes/performance.md, session 8, measures it).  It is
a cell key all the same (it can change a number), off by default.

The mode is a thread's (MXCSR): :func:`subnormal_mode` sets it on the calling thread — the thread
that trains, where the loop and, with one torch thread (the CPU groups' default), every kernel run —
and checks that torch's intra-op threads compute with it too (threads started after the call
inherit it; a pool started before does not, and is refused).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

__all__ = ["subnormal_mode", "flushes_subnormals", "FLUSHED"]

#: the record's ``subnormals`` field of a run with ``flush_subnormals = True`` (absent otherwise)
FLUSHED = "flushed (FTZ and DAZ in the training threads)"

#: elements per intra-op thread in the probe: above torch's parallel grain (32 768), so every
#: thread of the pool takes a share of it
_PER_THREAD = 1 << 16


def _smallest_subnormals(n: int) -> torch.Tensor:
    """``n`` float32 copies of the smallest subnormal, made from its bit pattern (no float arithmetic,
    so the caller's mode cannot flush them on the way in)."""
    return torch.ones(n, dtype=torch.int32).view(torch.float32)


def flushes_subnormals(threads: int = 1) -> bool:
    """Whether a product with a subnormal operand comes out zero in every one of ``threads`` intra-op
    threads (1: the calling thread alone)."""
    x = _smallest_subnormals(max(1, threads) * _PER_THREAD if threads > 1 else 1)
    return bool(((x * 2.0) == 0).all())


@contextlib.contextmanager
def subnormal_mode(flush: bool, device: torch.device) -> Iterator[None]:
    """Run the body with subnormals flushed (``flush``) or kept on the calling thread, then put back
    the mode it found.  ``flush`` on a device other than the CPU, on a CPU torch cannot set the mode
    on, or with intra-op threads that keep subnormals raises ``ValueError`` (it would change nothing,
    or only part of the arithmetic).  Off on another device: nothing to do."""
    if device.type != "cpu":
        if flush:
            raise ValueError(f"flush_subnormals is a CPU mode (x86 FTZ/DAZ); this run is on {device}, whose "
                             "kernels it would not change: drop flush_subnormals for GPU runs")
        yield
        return
    before = flushes_subnormals()
    try:
        if not torch.set_flush_denormal(flush) and flush:
            raise ValueError("flush_subnormals: torch cannot set FTZ/DAZ on this CPU (not x86 with SSE3), so it "
                             "would change nothing; drop flush_subnormals")
        threads = torch.get_num_threads()
        if flush and not flushes_subnormals(threads):
            raise ValueError(f"flush_subnormals: torch's {threads} intra-op threads were started before the run "
                             "and keep subnormals; run with one thread (threads = 1, the default for CPU "
                             "groups) or set it before torch's first parallel operation")
        yield
    finally:
        torch.set_flush_denormal(before)
