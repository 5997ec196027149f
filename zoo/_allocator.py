"""The process's heap allocator, tuned for training loops that free and re-allocate the same large
tensors every epoch."""
from __future__ import annotations

import ctypes
import os
from typing import Any, Optional

_ALLOCATOR_TUNED = False
_HUGE_PAGES: Optional[bool] = None  # whether the heap is advised; None: not asked yet

#: Bytes of heap reserved, untouched, for transparent huge pages when they are requested
#: (address space only: memory is taken as pages are first touched, as without the reserve).
HUGE_PAGE_RESERVE = 3 << 29  # 1.5 GiB
#: ``M_TRIM_THRESHOLD`` -1: glibc never trims the heap, so its free top (the reserve included) is never
#: given back, however large.  A finite threshold (even the largest int, 2 GiB) gives back every free top
#: above it, and a group whose epoch frees more than that faults it in again every epoch.
_TRIM_THRESHOLD = -1
_MADV_HUGEPAGE = 14


def tune_allocator() -> bool:
    """Keep freed heap memory in this process (glibc): no ``mmap``/``munmap`` per large tensor (and,
    once :func:`request_huge_pages` is called, 2 MiB pages for the tensors allocated afterwards).

    glibc serves every allocation above its mmap threshold (128 KiB .. 32 MiB) with a fresh
    ``mmap`` and returns it on free, so each epoch's ``(E, R, H, C)`` edge tensors are page-faulted
    in from zero again: on a 2-core CPU that kernel time was 40-60 % of a stacked Cora epoch.
    Serving them from the heap, never trimmed (whatever the size of its free top), instead measured
    2.6-4x less CPU time per replica-epoch (Cora gatv2 L=10, 15 replicas).  Process-wide, once;
    ``ZOO_TUNE_ALLOCATOR=0`` opts out; a no-op off glibc.  Returns whether the tuning is in effect.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    if os.environ.get("ZOO_TUNE_ALLOCATOR", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        # M_TRIM_THRESHOLD (-1) = -1: never give the heap top back; M_MMAP_MAX (-4) = 0: no mmap'd chunks
        ok = mallopt(-1, _TRIM_THRESHOLD) == 1 and mallopt(-4, 0) == 1
    except (OSError, AttributeError):
        return False
    _ALLOCATOR_TUNED = bool(ok)
    return _ALLOCATOR_TUNED


def request_huge_pages() -> bool:
    """Where :func:`tune_allocator` is in effect: :func:`reserve_huge_page_heap`, once per process
    (``ZOO_HUGE_PAGES=0`` opts out).  Called by the kernels whose gathers jump over tensors too large
    for the cache (the compiled attention's, :mod:`zoo.ops._compiled.ops`), at their first such call:
    for small tensors 2 MiB pages gain nothing at the TLB, and each costs a 2 MiB zeroing at its first
    touch.  Returns whether the heap is advised."""
    global _HUGE_PAGES
    if _HUGE_PAGES is None:
        if not _ALLOCATOR_TUNED or os.environ.get("ZOO_HUGE_PAGES", "1") == "0":
            return False
        _HUGE_PAGES = reserve_huge_page_heap()  # once, whatever the outcome
    return _HUGE_PAGES


def _heap_start() -> Optional[int]:
    """The first address of the process's heap (``[heap]`` in /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                if line.rstrip().endswith("[heap]"):
                    return int(line.split("-", 1)[0], 16)
    except OSError:
        pass
    return None


def _libc_calls(libc: Any) -> Any:
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_ssize_t]
    libc.madvise.restype, libc.madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def reserve_huge_page_heap(libc: Optional[Any] = None, reserve: int = HUGE_PAGE_RESERVE) -> bool:
    """Grow the heap by ``reserve`` bytes that nothing has touched yet and ask the kernel for
    transparent huge pages on the whole heap (``madvise(MADV_HUGEPAGE)``; THP's ``madvise`` mode).

    The graph kernels gather a node's row (a few hundred bytes to a few KB) per edge from all over
    feature tensors of tens of MB: with 4 KiB pages nearly every gather missed the TLB as well as the
    cache (on a virtual machine each miss is a two-level page walk).  On 2 MiB pages the first-layer
    GATv2 kernels of Amazon Computers took 15-25 % less CPU time; the numbers are the same (only the
    physical backing of the same addresses changes).  The tensors allocated after this call come
    from the reserve (glibc's heap, with :func:`tune_allocator`'s settings never given back); pages
    of the heap touched before it keep 4 KiB (collapsing them, ``MADV_COLLAPSE``, cost ~2 s of system
    time on Amazon Computers for no measured gain), and so does heap grown past the reserve.  Returns
    whether the kernel took the advice (False off Linux / glibc, or without THP).
    """
    try:
        libc = _libc_calls(libc if libc is not None else ctypes.CDLL(None))
        start = _heap_start()
        block = libc.malloc(reserve)  # with no mmap'd chunks, the heap's top grows past `reserve`
        end = libc.sbrk(0)
        if block:
            libc.free(block)  # back to the top, which is never trimmed: it stays
        if start is None or not end or end <= start:
            return False
        return libc.madvise(start, end - start, _MADV_HUGEPAGE) == 0
    except (OSError, AttributeError):
        return False
