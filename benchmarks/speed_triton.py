"""Forward+backward time of one hidden attention layer on CUDA: the Triton attention against the
torch-op paths, timed with CUDA events.

The layers and variants of ``speed_kernels.py`` (``compiled`` = the Triton op on CUDA, ``fused``
= the torch-op kernels, ``agg`` = the fused aggregation only, ``plain`` = neither), 1 replica or
R stacked under ``vmap``, interleaved in one process (best of ``--repeat``).  Prints ms per
forward+backward and the ratios compiled/fused and compiled/plain.

    python benchmarks/speed_triton.py --device cuda
    python benchmarks/speed_triton.py --device cuda --configs cora-gatv2,pubmed-gat --replicas 1,15

Without a CUDA device it prints ``no CUDA device: nothing to time`` and exits 0.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Dict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from speed_kernels import CONFIGS, VARIANTS, make_step, set_variant  # noqa: E402


def cuda_ms(step: Callable[[], None], calls: int) -> float:
    """Mean ms per call of ``step`` over ``calls`` calls, between two CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def time_variants(step: Callable[[], None], repeat: int) -> Dict[str, float]:
    """Best ms per forward+backward of each variant, interleaved (each warmed up first)."""
    step()
    calls = max(1, int(300.0 / max(cuda_ms(step, 1), 1e-3)))  # ~0.3 s per timing
    best = {name: float("inf") for name in VARIANTS}
    for _ in range(repeat):
        for name in VARIANTS:
            set_variant(name)
            step()  # warm-up: the first call of a path compiles its kernels and builds its caches
            best[name] = min(best[name], cuda_ms(step, calls))
    set_variant("compiled")
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="a CUDA device (cuda, cuda:1)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--replicas", default="1,15")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    if not args.device.startswith("cuda"):
        p.error(f"--device {args.device}: this benchmark times CUDA kernels; use benchmarks/speed_kernels.py "
                "for the CPU")
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time")
        return 0
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    from zoo.ops._compiled import ops

    device = torch.device(args.device)
    serves = ops.available(device)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}, Triton attention: "
          f"{'on' if serves else 'UNAVAILABLE (compiled = the torch-op path)'}; ms per forward+backward "
          "of one hidden layer (CUDA events)")
    with torch.cuda.device(device):
        for config in args.configs.split(","):
            for replicas in (int(r) for r in args.replicas.split(",")):
                t = time_variants(make_step(config, replicas, str(device)), args.repeat)
                print(f"{config:14} R={replicas:<3}" + "".join(f" {k} {v:8.3f}" for k, v in t.items())
                      + f"   compiled/fused {t['compiled'] / t['fused']:.2f}"
                      + f"  compiled/plain {t['compiled'] / t['plain']:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
