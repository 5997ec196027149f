"""The training epoch replayed as CUDA graphs against the eager epoch, on a real GPU (skipped without
CUDA; ``make test-gpu`` fails instead): every family with dropout and attention dropout, Adam and
SGD with momentum and the plateau scheduler, a graph task with static batches, a resumed mid-run
checkpoint, the self-check passing on real captures, a capture that fails (the group falls back and
the process is not trained on), and the generator support this torch reports.

The CPU tests (``test_cuda_graphs.py``) check the static-buffer contract through a double of the
capture, bitwise; here the real capture runs.  Scatter-adds on CUDA use atomics, so two eager runs
may already differ in the last bits: the runs are compared at float64 to 1e-9 (relative), and the
float32 Triton path to float32 rounding (1e-4).
"""
from __future__ import annotations

import os

import pytest
import torch

import zoo
import zoo.trainer.graphs as graphs
from tests.trainer.test_train import graph_level_task, synthetic_task
from tests.trainer.test_host_sync import FAMILIES, OPTIMISERS, _dropouts
from zoo.nn.readout import GraphPool
from zoo.trainer.graphs import DEFAULT_ONLY, GraphFallback
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.trainer.resume import ResumeFile, ResumePolicy
from zoo.trainer.state import LoopState

#: ``make test-gpu`` sets it: a missing GPU fails the run instead of skipping it.
if os.environ.get("ZOO_REQUIRE_CUDA") == "1" and not torch.cuda.is_available():
    raise RuntimeError("ZOO_REQUIRE_CUDA=1 but torch sees no CUDA device: run `make test-gpu` on a GPU machine")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")
SEEDS = [0, 1, 2]


class Counting(graphs.CudaBackend):
    """The real backend, counting replays (so a test knows the epochs were replayed)."""

    def __init__(self, device):
        super().__init__(device)
        self.captures = []

    def new_capture(self, generators):
        capture = super().new_capture(generators)
        real = capture.replay
        capture.replays = 0

        def replay():
            capture.replays += 1
            real()

        capture.replay = replay
        self.captures.append(capture)
        return capture


def _run(task, factory, cfg, dtype=torch.float64, mode="auto", backend=None, resume=None):
    cfg = TrainConfig(**{**cfg.__dict__, "cuda_graphs": mode})
    reps, view = build_replicas(task, [factory] * len(SEEDS), SEEDS, CUDA, dtype, cfg, True)
    with pytest.MonkeyPatch.context() as mp:
        if backend is not None:
            mp.setattr(graphs, "capture_backend", lambda device: backend)
        results = train_replicas(task, reps, view, cfg, SEEDS, resume=resume)
    return results, [p.detach().cpu() for p in reps.params]


def _close(a, b, rtol):
    (ra, pa), (rb, pb) = a, b
    for x, y in zip(ra, rb):
        assert (x.best_epoch, x.epochs_run, x.stop_reason) == (y.best_epoch, y.epochs_run, y.stop_reason)
        for key, u, v in [*((k, x.metrics[k], y.metrics[k]) for k in x.metrics), ("val_loss", x.val_loss, y.val_loss),
                          ("train_loss", x.train_loss, y.train_loss)]:
            assert (u is None) == (v is None) and (u is None or u == pytest.approx(v, rel=rtol, abs=rtol)), key
    for u, v in zip(pa, pb):
        torch.testing.assert_close(u, v, rtol=rtol, atol=rtol)


def _transductive(name, which=None):
    task = synthetic_task(n=60)
    optimizer, options = OPTIMISERS[sorted(FAMILIES).index(name) % 2 if which is None else which]
    cfg = TrainConfig(optimizer=optimizer, epochs=12, loss_threshold=0.0, patience=6, keep_best_state=True,
                      check_every=5, **options)
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, **FAMILIES[name], **_dropouts(name))
    return task, factory, cfg


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_replayed_epochs_are_the_eager_ones_for_every_family(name):
    task, factory, cfg = _transductive(name)
    eager = _run(task, factory, cfg, mode="off")
    backend = Counting(CUDA)
    replayed = _run(task, factory, cfg, backend=backend)
    assert len(backend.captures) == 2 and all(c.replays > 1 for c in backend.captures)  # assess, advance
    assert {r.extra["cuda_graphs"] for r in replayed[0]} == {"replayed"}  # the self-check passed
    _close(eager, replayed, 1e-9)


@pytest.mark.parametrize("name", ["gat", "gatv2"])
def test_float32_replays_match_to_float32_rounding(name):
    """float32 takes the Triton attention kernels; SGD (Adam's normalised step would magnify the
    last-bit differences of atomic scatter-adds, present between two eager runs too)."""
    task, factory, cfg = _transductive(name, which=1)
    _close(_run(task, factory, cfg, torch.float32, mode="off"),
           _run(task, factory, cfg, torch.float32, backend=Counting(CUDA)), 1e-4)


def test_graph_task_with_static_batches_is_replayed():
    task = graph_level_task()
    cfg = TrainConfig(optimizer="sgd", lr=0.1, momentum=0.9, epochs=10, loss_threshold=0.0)
    factory = lambda: GraphPool(zoo.build("gatv2", in_dim=4, out_dim=8, hidden_dim=8, num_layers=2,  # noqa: E731
                                          dropout=0.3, attn_dropout=0.2), 8, 2)
    backend = Counting(CUDA)
    replayed = _run(task, factory, cfg, backend=backend)
    # no stop: every epoch but the last, and once more by the self-check
    assert [c.replays for c in backend.captures] == [10 - graphs.WARMUP + 1] * 2
    _close(_run(task, factory, cfg, mode="off"), replayed, 1e-9)


def test_a_resumed_mid_run_checkpoint_matches(tmp_path):
    """Saved between replays (the generators' states as the replays left them), resumed: the
    records of an uninterrupted run."""
    task, factory, cfg = _transductive("gatv2")
    straight = _run(task, factory, cfg, mode="off")

    class Crash(RuntimeError):
        pass

    real_save = ResumeFile.save

    def save_then_crash(self, state):
        real_save(self, state)
        raise Crash("killed")

    path = tmp_path / "group.pt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ResumeFile, "save", save_then_crash)
        with pytest.raises(Crash):
            _run(task, factory, cfg, resume=ResumeFile(path, ResumePolicy(None, 6)))
    backend = Counting(CUDA)
    resumed = _run(task, factory, cfg, backend=backend, resume=ResumeFile(path, ResumePolicy(None, 1000)))
    assert backend.captures and backend.captures[0].replays > 0
    assert {r.extra["resumed_at_epoch"] for r in resumed[0]} == {6}
    _close(straight, resumed, 1e-9)


def test_a_capture_that_fails_falls_back(monkeypatch):
    """A host read inside the epoch makes the real capture fail: ``auto`` raises GraphFallback (the group
    must run again in a fresh process: ``zoo bench`` does), ``on`` an error."""
    task, factory, cfg = _transductive("gatv2")
    real = LoopState.keep_best

    def reading(self, params, improved):
        bool(improved.any())  # a device-to-host read: not allowed while capturing
        real(self, params, improved)

    monkeypatch.setattr(LoopState, "keep_best", reading)
    with pytest.raises(GraphFallback, match="could not be captured") as e:
        _run(task, factory, cfg)
    assert e.value.poisoned
    with pytest.raises(RuntimeError, match="cuda_graphs = 'on': the training epoch could not be captured"):
        _run(task, factory, cfg, mode="on")


def test_this_torch_captures_the_replicas_streams():
    """The zoo relies on graph-safe user generators (torch >= 2.4); the probe says how this torch keeps them."""
    support = graphs.rng_support(device=CUDA)
    print(f"torch {torch.__version__}: generator state under CUDA graphs: {support}")
    assert support != DEFAULT_ONLY
