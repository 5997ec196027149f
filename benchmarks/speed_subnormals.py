"""A group's epochs with subnormals kept against flushed (``flush_subnormals``), from a saved mid-run state.

Resumes a suite group from its resume state file (``OUT/checkpoints/<key>.pt``, written every 10
minutes by ``zoo bench``; the suite's cell is found by the file's fingerprint) and trains
``--epochs`` more epochs twice per round, kept then flushed (the order alternates between rounds),
in this process on one torch thread.  Prints each run's CPU seconds per epoch (``time.process_time``)
and the median ratio kept / flushed, the state's share of subnormal parameters, and whether the
two runs' record fields (metrics, losses, epochs to best) are equal; the end parameters that differ
are counted with the largest magnitude among them.

    python benchmarks/speed_subnormals.py OUT/checkpoints/KEY.pt --suite nonlocal_accuracy --epochs 20
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import torch

from zoo.bench.suite.load import load_suite
from zoo.trainer.cells import TaskCache, start_group
from zoo.trainer.resume import ResumeFile, ResumePolicy

TINY = torch.finfo(torch.float32).tiny


def subnormal_count(tensors: List[torch.Tensor]) -> int:
    return sum(int(((t != 0) & (t.abs() < TINY)).sum()) for t in tensors)


def run(path: Path, payload: Dict[str, Any], configs: List[Any], task: Any, epochs: int,
        flush: bool) -> Tuple[float, Any, List[torch.Tensor]]:
    """CPU seconds per epoch, the first replica's result and the end parameters of one resumed run."""
    start = int(payload["state"]["next_epoch"])
    group = start_group(configs, task, torch.device("cpu"), epochs=start + epochs, flush_subnormals=flush)
    resume = ResumeFile(path, ResumePolicy(None), payload["fingerprint"])  # never saves: the file stays as it is
    cpu = time.process_time()
    results = group.train(resume=resume)
    return (time.process_time() - cpu) / epochs, results[0], [p.detach().clone() for p in group.replicas.params]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("state", type=Path, help="a group's resume state file (OUT/checkpoints/KEY.pt)")
    ap.add_argument("--suite", required=True, help="the suite whose group saved it")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    payload = torch.load(args.state, map_location="cpu", weights_only=False)
    ids = payload["fingerprint"]["cells"]
    cells = {c.id: c for c in load_suite(args.suite, validate_models=False).cells}
    configs = [cells[i].config for i in ids]
    task = TaskCache().get(configs[0]["task"])
    params = payload["state"]["params"]
    print(f"state at epoch {payload['state']['next_epoch']}: {subnormal_count(params)} of "
          f"{sum(p.numel() for p in params)} parameters and {subnormal_count(payload['state']['optimizer'].get('exp_avg', []))} "
          f"first moments subnormal")
    cpu: Dict[bool, List[float]] = {False: [], True: []}
    last: Dict[bool, Any] = {}
    for r in range(args.rounds):
        for flush in ((False, True) if r % 2 == 0 else (True, False)):
            per_epoch, res, end = run(args.state, payload, configs, task, args.epochs, flush)
            cpu[flush].append(per_epoch)
            last[flush] = (res, end)
            print(f"round {r} {'flushed' if flush else 'kept   '}: {per_epoch:.3f} CPU-s/epoch, "
                  f"{subnormal_count(end)} subnormal parameters at the end", flush=True)
    kept, flushed = statistics.median(cpu[False]), statistics.median(cpu[True])
    print(f"median CPU-s/epoch: kept {kept:.3f}, flushed {flushed:.3f}, kept / flushed {kept / flushed:.2f}")
    (ra, pa), (rb, pb) = last[False], last[True]
    fields = ("metrics", "train_loss", "val_loss", "best_epoch", "epochs_run", "stop_reason", "diverged")
    print("record fields equal:", {f: getattr(ra, f) == getattr(rb, f) for f in fields})
    differ = [(a != b) for a, b in zip(pa, pb)]
    largest = max((float(torch.maximum(a[d].abs(), b[d].abs()).max()) for a, b, d in zip(pa, pb, differ) if d.any()),
                  default=0.0)
    print(f"end parameters differing: {sum(int(d.sum()) for d in differ)}, largest magnitude among them {largest:.3g}")


if __name__ == "__main__":
    main()
