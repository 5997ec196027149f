"""Compile every Triton specialization ahead of time for sm_80 and sm_90 — no GPU needed.

Run as ``python -m tests.ops.compiled.aot_compile`` in a process where Triton's interpreter is off
(the interpreter replaces Triton's standard library at import).  Prints one line per compiled
kernel; exits non-zero on the first compile error."""
from __future__ import annotations

import itertools
import os
import sys
import time

if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
    sys.exit("aot_compile needs TRITON_INTERPRET unset")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource, compile  # noqa: E402

from zoo.ops._compiled import triton_attention as ta  # noqa: E402

TARGETS = [GPUTarget("cuda", 80, 32), GPUTarget("cuda", 90, 32)]


def specializations(dtypes=("fp32", "fp64")):
    """(kernel name, signature, constexprs) for every variant the launchers in triton_attention use."""
    kernels = ta.kernels(False)
    for dt, v2, bias in itertools.product(dtypes, (True, False), (True, False)):
        if v2 and bias:
            continue  # GATv2's op has no edge term
        p = f"*{dt}"
        blocks = dict(BLOCK_E=ta.BLOCK_E, BLOCK_C=64 if v2 else 2, BLOCK_CV=64)
        sig = dict(xs=p, xd=p, att=p, bias=p, val=p, crow="*i64", col="*i64", perm="*i64", out=p, alpha=p, lse=p,
                   H="i32", C="i32", CV="i32", slope_ptr=p)
        yield "forward", kernels["forward"], sig, dict(V2=v2, HAS_BIAS=bias, **blocks)
        for ga in (True, False):
            sig = dict(go=p, ga=p, xs=p, xd=p, att=p, bias=p, val=p, out=p, lse=p, crow="*i64", col="*i64",
                       perm="*i64", de_buf=p, al_buf=p, d_dst=p, d_part=p, H="i32", C="i32", CV="i32", slope_ptr=p)
            yield "backward_dst", kernels["backward_dst"], sig, dict(V2=v2, HAS_BIAS=bias, HAS_GA=ga, **blocks)
        if not bias:
            sig = dict(go=p, xs=p, xd=p, att=p, crow_s="*i64", col_s="*i64", perm_s="*i64", de_buf=p, al_buf=p,
                       d_src=p, d_val=p, H="i32", C="i32", CV="i32", slope_ptr=p)
            yield "backward_src", kernels["backward_src"], sig, dict(V2=v2, **blocks)
    for dt in dtypes:
        sig = dict(part=f"*{dt}", total=f"*{dt}", N="i32", HC="i32")
        yield "column_sum", kernels["column_sum"], sig, dict(BLOCK_N=ta.BLOCK_N, BLOCK_C=64)


def main() -> int:
    """``--dtypes fp32`` (default: fp32 and fp64)."""
    dtypes = tuple(sys.argv[sys.argv.index("--dtypes") + 1].split(",")) if "--dtypes" in sys.argv else ("fp32", "fp64")
    count = 0
    for target in TARGETS:
        for name, fn, sig, consts in specializations(dtypes):
            start = time.perf_counter()
            signature = {**sig, **{k: "constexpr" for k in consts}}
            compiled = compile(ASTSource(fn, signature, constexprs=consts), target=target)
            assert compiled.asm.get("cubin"), f"{name}: no cubin"
            count += 1
            print(f"sm_{target.arch} {name} {consts} {time.perf_counter() - start:.2f}s", flush=True)
    print(f"compiled {count} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
