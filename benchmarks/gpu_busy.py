"""How busy the device is during the runner's stacked training epochs: device time / wall time.

``torch.profiler`` over ``--epochs`` epochs of ``train_replicas`` (SGD, no stopping, ``--replicas``
stacked replicas: 3 inits x seeds, as ``speed_train.py``), after 3 warm-up epochs.  On CUDA the
figures come from the profiler's *device* events alone (kernels, copies, fills): their summed
duration (kernel time), and the union of their intervals (busy time: overlapping kernels on several
streams count once).  The profiler also books each kernel's time on the operator row that launched
it (``aten::mm``, ``zoo_triton::gatv2_backward``), so summing the self device time of every row of
``key_averages()`` counts each kernel twice.  On the CPU the kernel time is the self time of the
operators that compute (``aten::`` and the zoo's compiled ops), so the share left over is the host's
Python, dispatch and autograd bookkeeping.  Prints one line: wall per epoch, kernel time per epoch,
busy %, device events per epoch, and wall per event; ``--table`` adds the profiler's top kernels.
The training runs as ``zoo bench`` runs it: on CUDA its epochs are replayed as CUDA graphs
(``cuda_graphs = "auto"``, :mod:`zoo.trainer.graphs`).  ``--graphs`` times instead the same
training with ``cuda_graphs`` on and off in this process (CUDA-synchronised wall clock over the
replayed epochs: after the warm-up, the capture and its self-check, before the last, eager, epoch)
and prints both and their ratio.

    python benchmarks/gpu_busy.py --device cuda                          # cornell_npz gatv2 L=40 R=15
    python benchmarks/gpu_busy.py --device cpu --layers 2 --replicas 3 --epochs 3
    python benchmarks/gpu_busy.py --device cuda --graphs --epochs 40     # ms/epoch, CUDA graphs on vs off
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional

import torch
from torch.autograd import DeviceType

#: operator namespaces whose self time is computation (CPU profiles)
COMPUTE_PREFIXES = ("aten::", "zoo_kernels::", "zoo_triton::")
INITS = ("xavier", "balanced_xavier", "balanced_orthogonal")


@dataclass(frozen=True)
class Busy:
    """Kernel time and busy time against wall time over ``epochs`` profiled epochs (``busy_s``: the
    union of the device's intervals on CUDA; the kernel time where there are no intervals, the CPU)."""

    epochs: int
    wall_s: float
    kernel_s: float
    kernels: int
    busy_s: Optional[float] = None

    @property
    def fraction(self) -> float:
        busy = self.kernel_s if self.busy_s is None else self.busy_s
        return busy / self.wall_s if self.wall_s > 0 else float("nan")

    def line(self, label: str) -> str:
        e = max(self.epochs, 1)
        return (f"{label}: wall/epoch {1e3 * self.wall_s / e:.2f} ms, kernel time/epoch {1e3 * self.kernel_s / e:.2f} ms "
                f"({100 * self.fraction:.1f}% busy), kernels/epoch {self.kernels / e:.0f}, "
                f"us wall per kernel {1e6 * self.wall_s / max(self.kernels, 1):.1f}")


def _is_device(event: Any) -> bool:
    """A device-side event (a kernel, copy or fill), not an operator the host ran."""
    kind = getattr(event, "device_type", DeviceType.CPU)
    return kind not in (DeviceType.CPU, None)


def kernel_time(events: Iterable[Any], device: torch.device) -> tuple:
    """``(seconds, count)`` of the work in profiler ``events`` (``prof.events()`` or ``key_averages()``):
    on CUDA the device events' own time (never an operator row's, which repeats its kernels'); on the
    CPU the self time of the computing operators (:data:`COMPUTE_PREFIXES`)."""
    total_us, count = 0.0, 0
    for e in events:
        if device.type == "cuda":
            us = float(e.self_device_time_total) if _is_device(e) else 0.0
        else:
            us = float(e.self_cpu_time_total) if str(e.key).startswith(COMPUTE_PREFIXES) else 0.0
        if us > 0:
            total_us += us
            count += int(getattr(e, "count", 1))
    return total_us / 1e6, count


def busy_time(events: Iterable[Any]) -> float:
    """Seconds in which the device ran anything: the union of the device events' intervals (raw
    events, ``prof.events()``)."""
    spans = sorted((e.time_range.start, e.time_range.end) for e in events if _is_device(e))
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total / 1e6


def _setup(dataset: str, model: str, layers: int, replicas: int, hidden: int) -> tuple:
    """The task, the replicas' factories and seeds (3 inits x seeds, as ``speed_train.py``)."""
    import zoo
    from zoo.datasets import load

    task = load(dataset)
    inits = [INITS[i % len(INITS)] for i in range(replicas)]
    seeds = [i // len(INITS) for i in range(replicas)]
    factories = [(lambda init=init: zoo.build(model, in_dim=task.num_features, out_dim=task.num_classes,
                                              hidden_dim=hidden, num_layers=layers, heads=1, init=init))
                 for init in inits]
    return task, factories, seeds


def profile(dataset: str, model: str, layers: int, replicas: int, epochs: int, device: torch.device,
            hidden: int = 64, table: bool = False) -> Busy:
    """Profile ``epochs`` stacked epochs of ``model`` on ``dataset`` (the runner's path)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from zoo.trainer.config import TrainConfig
    from zoo.trainer.loop import train_replicas
    from zoo.trainer.replicas import build_replicas

    task, factories, seeds = _setup(dataset, model, layers, replicas, hidden)
    cfg = TrainConfig(optimizer="sgd", lr=0.05, epochs=epochs, loss_threshold=0.0)
    reps, view = build_replicas(task, factories, seeds, device, torch.float32, cfg, True)
    train_replicas(task, reps, view, TrainConfig(**{**cfg.__dict__, "epochs": 3}), seeds)  # warm-up
    reps, view = build_replicas(task, factories, seeds, device, torch.float32, cfg, True)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync()
    with torch_profile(activities=activities) as prof:
        start = time.perf_counter()
        train_replicas(task, reps, view, cfg, seeds)
        sync()
        wall = time.perf_counter() - start
    raw = prof.events()
    seconds, count = kernel_time(raw, device)
    if table:
        key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
        print(prof.key_averages().table(sort_by=key, row_limit=8, max_name_column_width=50), flush=True)
    return Busy(epochs, wall, seconds, count, busy_time(raw) if device.type == "cuda" else None)


class _Window:
    """A callback timing evaluated epochs ``start .. stop`` (CUDA-synchronised at both ends; no other
    host read, so the loop keeps its check interval)."""

    syncs_host = False

    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop, self.seen, self.t0, self.t1 = start, stop, 0, 0.0, 0.0

    def on_epoch_end(self, state) -> None:
        self.seen = int(state.epoch) + 1  # states evaluated so far
        if self.seen in (self.start, self.stop):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if self.seen == self.start:
                self.t0 = time.perf_counter()
            else:
                self.t1 = time.perf_counter()

    @property
    def ms_per_epoch(self) -> float:
        return 1e3 * (self.t1 - self.t0) / (self.stop - self.start)


def graphs_speed(dataset: str, model: str, layers: int, replicas: int, epochs: int, device: torch.device,
                 hidden: int = 64) -> dict:
    """ms per epoch of the same training with ``cuda_graphs`` ``"on"`` and ``"off"`` (after one
    untimed run for the kernels' compilation), over the epochs after the warm-up and the capture."""
    from zoo.trainer.config import TrainConfig
    from zoo.trainer.graphs import WARMUP
    from zoo.trainer.loop import train_replicas
    from zoo.trainer.replicas import build_replicas

    task, factories, seeds = _setup(dataset, model, layers, replicas, hidden)
    start = WARMUP + 2  # past the capture's epoch
    if epochs <= start:
        raise ValueError(f"--epochs must be > {start} to time replayed epochs")
    out = {}
    for mode in ("off", "on", "off"):  # the first run compiles the kernels: the second "off" is timed
        cfg = TrainConfig(optimizer="sgd", lr=0.05, epochs=epochs, loss_threshold=0.0, cuda_graphs=mode)
        reps, view = build_replicas(task, factories, seeds, device, torch.float32, cfg, True)
        window = _Window(start, epochs)
        train_replicas(task, reps, view, cfg, seeds, callbacks=[window])
        out[mode] = window.ms_per_epoch
    return out


def graphs_line(label: str, ms: dict) -> str:
    return (f"{label}: cuda graphs on {ms['on']:.2f} ms/epoch, off {ms['off']:.2f} ms/epoch "
            f"(on/off {ms['on'] / ms['off']:.3f}x)")


def _use_the_double() -> None:
    """The CPU smoke run: "CUDA graphs" through the tests' double of a capture."""
    import sys

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sys.path.insert(0, root)
    import zoo.trainer.graphs as graphs
    from tests.trainer.capture_double import CheckedBackend

    graphs.capture_backend = lambda device: CheckedBackend()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dataset", default="cornell_npz")
    p.add_argument("--model", default="gatv2")
    p.add_argument("--layers", type=int, default=40)
    p.add_argument("--replicas", type=int, default=15)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--table", action="store_true", help="also the profiler's top kernels")
    p.add_argument("--graphs", action="store_true", help="time the epochs with CUDA graphs on vs off instead")
    p.add_argument("--double", action="store_true",
                   help="--graphs on the CPU through the tests' capture double (a smoke run: no timing meaning)")
    args = p.parse_args()
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error(f"--device {args.device}: this torch sees no CUDA device (torch {torch.__version__})")
    label = f"{args.dataset} {args.model} L={args.layers} R={args.replicas} on {args.device}"
    if args.graphs:
        if device.type != "cuda" and not args.double:
            p.error("--graphs: CUDA graphs need --device cuda (or --double on the CPU, a smoke run)")
        if args.double:
            _use_the_double()
        ms = graphs_speed(args.dataset, args.model, args.layers, args.replicas, args.epochs, device)
        print(graphs_line(label, ms), flush=True)
        return
    busy = profile(args.dataset, args.model, args.layers, args.replicas, args.epochs, device, table=args.table)
    print(busy.line(label), flush=True)


if __name__ == "__main__":
    main()
