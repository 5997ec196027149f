"""Compile every Triton specialization ahead of time for sm_80 and sm_90 — no GPU needed — and
check in each kernel's TTIR that offsets are int64 (``E``, ``N H C`` beyond ``2^31`` must not wrap).

Run as ``python -m tests.ops.compiled.aot_compile`` in a process where Triton's interpreter is off
(the interpreter replaces Triton's standard library at import).  Prints one line per compiled
kernel, then ``compiled N of N kernels``; exits non-zero on the first compile error or int32 offset.
The int64 check is first run on a kernel with int32 offset arithmetic, which it must flag."""
from __future__ import annotations

import itertools
import os
import re
import sys
import time
from typing import Iterator, List, Tuple

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    sys.exit("aot_compile needs TRITON_INTERPRET unset")

import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, compile  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from zoo.ops._compiled import triton_attention as ta  # noqa: E402

TARGETS = [GPUTarget("cuda", 80, 32), GPUTarget("cuda", 90, 32)]
#: The GAT/GATv2 variants the launchers use: (V2, HAS_BIAS) — GATv2's op has no edge term.
FAMILIES = ((True, False), (False, True), (False, False))


def specializations(dtypes=("fp32", "fp64")) -> Iterator[Tuple[str, dict, dict]]:
    """(kernel name, signature, constexprs) for every variant the launchers in triton_attention use:
    both degree buckets (``LIGHT``: one block of ``BLOCK_E``; heavy: a loop of ``HEAVY_BLOCK_E``)."""
    for dt, (v2, bias), light in itertools.product(dtypes, FAMILIES, (True, False)):
        p = f"*{dt}"
        blocks = dict(V2=v2, HAS_BIAS=bias, LIGHT=light, BLOCK_E=ta.BLOCK_E if light else ta.HEAVY_BLOCK_E,
                      BLOCK_C=64 if v2 else 2, BLOCK_CV=64)
        sizes = dict(H="i32", C="i32", CV="i32", slope_ptr=p)
        sig = dict(rows="*i64", xs=p, xd=p, att=p, bias=p, val=p, crow="*i64", col="*i64", perm="*i64", out=p,
                   alpha=p, lse=p, **sizes)
        yield "forward", sig, blocks
        for ga in (True, False):
            sig = dict(rows="*i64", go=p, ga=p, xs=p, xd=p, att=p, bias=p, val=p, out=p, lse=p, crow="*i64",
                       col="*i64", perm="*i64", de_buf=p, d_dst=p, d_part=p, **sizes)
            yield "backward_dst", sig, dict(HAS_GA=ga, **blocks)
        sig = dict(rows="*i64", go=p, xs=p, xd=p, att=p, bias=p, lse=p, crow_s="*i64", col_s="*i64",
                   perm_s="*i64", de_buf=p, d_src=p, d_val=p, **sizes)
        yield "backward_src", sig, blocks
    for dt in dtypes:
        sig = dict(part=f"*{dt}", total=f"*{dt}", N="i32", HC="i32")
        yield "column_sum", sig, dict(BLOCK_N=ta.BLOCK_N, BLOCK_C=64)


_ADDPTR = re.compile(r"tt\.addptr .*:\s*(?P<ptr>.+),\s*(?P<offset>[^,]+)$")
_MULI = re.compile(r"arith\.muli .*:\s*(?P<type>.+)$")


def narrow_offsets(ttir: str) -> List[str]:
    """TTIR lines whose offset arithmetic is 32-bit: an ``arith.muli`` on i32, or a ``tt.addptr``
    with an i32 offset (every pointer here gets one offset, computed in int64)."""
    narrow = []
    for line in ttir.splitlines():
        line = line.split(" loc(")[0].strip()
        match = _ADDPTR.search(line)
        if match and not match["offset"].rstrip(">").endswith("i64"):
            narrow.append(line)
        match = _MULI.search(line)
        if match and not match["type"].rstrip(">").endswith("i64"):
            narrow.append(line)
    return narrow


def _int32_offsets(x, n, BLOCK: tl.constexpr):  # the check's negative control
    offs = tl.program_id(0) * n + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs) + 1.0)


def _compile(fn, signature: dict, constexprs: dict, target: GPUTarget):
    compiled = compile(ASTSource(fn, {**signature, **{k: "constexpr" for k in constexprs}}, constexprs=constexprs),
                       target=target)
    assert compiled.asm.get("cubin"), "no cubin"
    return compiled


def main() -> int:
    """``--dtypes fp32`` (default: fp32 and fp64)."""
    dtypes = tuple(sys.argv[sys.argv.index("--dtypes") + 1].split(",")) if "--dtypes" in sys.argv else ("fp32", "fp64")
    control = _compile(JITFunction(_int32_offsets), dict(x="*fp32", n="i32"), dict(BLOCK=16), TARGETS[0])
    if not narrow_offsets(control.asm["ttir"]):
        print("the int64 offset check does not flag int32 offsets: fix narrow_offsets", file=sys.stderr)
        return 1
    kernels = ta.kernels(False)
    specs = list(specializations(dtypes))
    count = 0
    for target in TARGETS:
        for name, sig, consts in specs:
            start = time.perf_counter()
            compiled = _compile(kernels[name], sig, consts, target)
            narrow = narrow_offsets(compiled.asm["ttir"])
            if narrow:
                print(f"sm_{target.arch} {name} {consts}: int32 offset arithmetic:\n  " + "\n  ".join(narrow),
                      file=sys.stderr)
                return 1
            count += 1
            print(f"sm_{target.arch} {name} {consts} {time.perf_counter() - start:.2f}s", flush=True)
    print(f"compiled {count} of {len(TARGETS) * len(specs)} kernels, int64 offsets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
