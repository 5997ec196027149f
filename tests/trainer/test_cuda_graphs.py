"""The replayed epoch (``cuda_graphs``) on the CPU, through a double of the capture that checks the
static-buffer contract op by op (:mod:`tests.trainer.capture_double`): the records are bitwise the
eager ones at float64 for every ``check_every``, with dropout, Adam / AdamW / SGD, the plateau
scheduler and replicas stopping for every reason; a resumed run too; the double catches a rebound
state tensor, a per-epoch host number and a host read; the modes and the fallback."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import zoo
import zoo.trainer.graphs as graphs
from tests.trainer.test_train import graph_level_task, synthetic_task
from tests.trainer.capture_double import CheckedBackend, ContractError
from tests.trainer.crash import Crash, crash_after_save
from tests.trainer.test_check_every import CONFIGS, SEEDS, _factory, _same
from tests.trainer.test_host_sync import FAMILIES, OPTIMISERS, _dropouts
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.trainer.resume import ResumeFile, ResumePolicy
from zoo.trainer.state import LoopState
from zoo.trainer.stopping import Bookkeeping

CASES = {
    **CONFIGS,
    # select = "last" records the epoch itself as the selection key: read from the device clock
    "adamw_last": (synthetic_task, False, dict(optimizer="adamw", lr=0.02, weight_decay=0.01, warmup_epochs=4,
                                               epochs=20, select="last", patience_on="either", patience=6,
                                               loss_threshold=0.9)),
}


def _run(kind, backend, *, check_every=1, mode="auto", resume=None, monkeypatch=None, **changes):
    make, graph, options = CASES[kind]
    task = make()
    cfg = TrainConfig(check_every=check_every, keep_best_state=True, cuda_graphs=mode, **{**options, **changes})
    scales = [1.0, 1e200, 1.0, 3.0]
    reps, view = build_replicas(task, [_factory(task, s, graph) for s in scales], SEEDS, torch.device("cpu"),
                                torch.float64, cfg, True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graphs, "capture_backend", lambda device: backend)
        results = train_replicas(task, reps, view, cfg, SEEDS, resume=resume)
    return results, [p.detach().clone() for p in reps.params]


@pytest.mark.parametrize("kind,check_every", [("transductive", 1), ("transductive", 7), ("graph", 7),
                                              ("adamw_last", 1)])
def test_replayed_records_are_the_eager_ones_bitwise(kind, check_every):
    """K = 1 on the CPU: the eager run takes the optimiser's in-place path, the replayed one the masked
    path (a replay never reads the host), bitwise the same; K = 7: the run ends at a later check."""
    eager = _run(kind, None, check_every=check_every)
    backend = CheckedBackend()
    replayed = _run(kind, backend, check_every=check_every)
    assert len(backend.captures) == 2 and all(c.replays > 3 for c in backend.captures)  # assess, advance
    assert backend.warmups == 2 * graphs.WARMUP
    reasons = {r.stop_reason for r in eager[0]}
    assert "diverged" in reasons and len(reasons) >= 3  # replicas stop at different epochs, for different reasons
    _same(eager, replayed)


def _replay_equals_eager(task, factory, cfg, dtype):
    """Two replicas trained through the checked capture double and eagerly: records and final
    parameters bitwise equal, every epoch after the warm-up replayed (both halves)."""
    def run(backend):
        reps, view = build_replicas(task, [factory, factory], [0, 1], torch.device("cpu"), dtype, cfg, True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(graphs, "capture_backend", lambda device: backend)
            results = train_replicas(task, reps, view, cfg, [0, 1])
        return results, [p.detach().clone() for p in reps.params]

    backend = CheckedBackend()
    replayed = run(backend)
    assert [c.replays for c in backend.captures] == [cfg.epochs - graphs.WARMUP] * 2
    _same(run(None), replayed)


def test_a_resumed_replayed_run_matches_the_straight_eager_one(tmp_path):
    """Killed after a checkpoint written between replays, resumed (warm-up, capture, replays again):
    bitwise the records of an uninterrupted eager run."""
    straight = _run("transductive", None)

    path = tmp_path / "group.pt"
    backend = CheckedBackend()
    with pytest.MonkeyPatch.context() as mp:
        crash_after_save(mp)
        with pytest.raises(Crash, match="epoch 6"):
            _run("transductive", backend, check_every=25, resume=ResumeFile(path, ResumePolicy(None, 6)))
    assert backend.captures and backend.captures[0].replays >= 2  # the checkpoint was taken while replaying
    again = CheckedBackend()
    resumed = _run("transductive", again, check_every=7, resume=ResumeFile(path, ResumePolicy(None, 1000)))
    assert again.captures[0].replays > 3
    assert {r.extra["resumed_at_epoch"] for r in resumed[0]} == {6}
    for r in resumed[0]:
        del r.extra["resumed_at_epoch"], r.extra["resumed_elapsed_s"]
    _same(straight, resumed)


def test_the_double_catches_a_rebound_state_tensor(monkeypatch):
    """``state.best_val = new`` (as the bookkeeping once did) would leave a graph writing the old tensor."""
    real = Bookkeeping.update

    def rebinding(self, state, epoch, ev, stamp=None):
        out = real(self, state, epoch, ev, stamp)
        state.best_val = state.best_val.clone()
        return out

    monkeypatch.setattr(Bookkeeping, "update", rebinding)
    with pytest.raises(ContractError, match="differs from the capture"):
        _run("transductive", CheckedBackend())


def test_a_host_epoch_count_would_be_frozen_at_the_capture(monkeypatch):
    """Recording the host's epoch count, not the device clock: the replays repeat the captured epoch
    (as a CUDA graph would), so the recorded epochs are wrong, and the comparison says so."""
    eager = _run("transductive", None)
    real = Bookkeeping.update
    monkeypatch.setattr(Bookkeeping, "update", lambda self, state, epoch, ev, stamp=None: real(self, state, epoch, ev))
    frozen = _run("transductive", CheckedBackend())
    stops = {r.epochs_run for r in frozen[0] if r.stop_reason == "patience"}
    assert stops == {graphs.WARMUP} != {r.epochs_run for r in eager[0] if r.stop_reason == "patience"}
    with pytest.raises(AssertionError):
        _same(eager, frozen)


def test_a_failed_capture_trains_eagerly_with_one_warning(monkeypatch):
    """A host read in the epoch makes the capture fail: ``auto`` warns once, says why, and the records
    are the eager ones; ``on`` is an error."""
    eager = _run("transductive", None)
    real = LoopState.keep_best

    def reading(self, params, improved):
        bool(improved.any())  # a host read: no CUDA capture can hold it
        real(self, params, improved)

    monkeypatch.setattr(LoopState, "keep_best", reading)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = CheckedBackend()
        fallen = _run("transductive", backend)
    messages = [str(w.message) for w in caught if "cuda_graphs" in str(w.message)]
    assert len(messages) == 1 and "could not be captured" in messages[0] and "reads the device on the host" \
        in messages[0] and "training eagerly" in messages[0]
    assert [c.replays for c in backend.captures] == [0]
    _same(eager, fallen)
    with pytest.raises(RuntimeError, match="cuda_graphs = 'on': the training epoch could not be captured"):
        _run("transductive", CheckedBackend(), mode="on")


def test_a_failing_backend_falls_back_and_off_never_captures():
    eager = _run("graph", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallen = _run("graph", CheckedBackend(fail=RuntimeError("operation not permitted when stream is capturing")))
    assert [str(w.message) for w in caught if "cuda_graphs" in str(w.message)] == [
        "cuda_graphs: the training epoch could not be captured as a CUDA graph (RuntimeError: operation not "
        "permitted when stream is capturing); training eagerly"]
    _same(eager, fallen)
    off = CheckedBackend()
    _same(eager, _run("graph", off, mode="off"))
    assert off.captures == [] and off.warmups == 0


def test_modes_and_what_is_not_captured():
    with pytest.raises(ValueError, match="cuda_graphs must be one of auto, on, off, got 'yes'"):
        TrainConfig(cuda_graphs="yes")
    with pytest.raises(ValueError, match=r"cuda_graphs = 'on' needs a CUDA device, got cpu; use 'auto'"):
        _run("transductive", None, mode="on")
    # mini-batches are collated on the host every epoch: auto trains eagerly and says why; on refuses
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend = CheckedBackend()
        _run("graph", backend, batch_size=3, epochs=5)
    assert backend.captures == [] and any("mini-batches (batch_size = 3)" in str(w.message) for w in caught)
    with pytest.raises(ValueError, match=r"cuda_graphs = 'on' cannot capture this run: mini-batches"):
        _run("graph", CheckedBackend(), mode="on", batch_size=3, epochs=5)
    # a run too short to warm up is eager
    short = CheckedBackend()
    _run("transductive", short, epochs=graphs.WARMUP)
    assert short.captures == []


def test_cuda_graphs_is_no_suite_key():
    """It changes no number (the replayed kernels are the eager ones): not in a cell's config or id."""
    from zoo.bench.suite.schema import TRAIN_KEYS

    assert "cuda_graphs" in {f.name for f in dataclasses.fields(TrainConfig)} and "cuda_graphs" not in TRAIN_KEYS


def test_graph_level_task_with_static_batches_is_captured():
    assert graphs.capture_blocker(graph_level_task(), _view("graph", batch_size=0)) is None
    assert "mini-batches" in graphs.capture_blocker(graph_level_task(), _view("graph", batch_size=2))
    task = synthetic_task()
    rocauc = dataclasses.replace(task, metric="rocauc")
    assert graphs.capture_blocker(rocauc, _view("transductive")) == \
        "the task's metric (rocauc) is computed on the host every epoch"


def _view(kind, **changes):
    make, graph, options = CASES[kind]
    task = make()
    cfg = TrainConfig(**{**options, **changes})
    return build_replicas(task, [_factory(task, 1.0, graph)], [0], torch.device("cpu"), torch.float64, cfg, True)[1]


def test_zoo_fit_and_the_cli_take_cuda_graphs(capsys, tmp_path):
    from zoo.cli import main

    with pytest.raises(ValueError, match="cuda_graphs must be one of auto, on, off, got 'maybe'"):
        zoo.fit("gat", "twin", epochs=2, device="cpu", cuda_graphs="maybe", progress=False)
    with pytest.raises(ValueError, match="cuda_graphs = 'on' needs a CUDA device, got cpu"):
        zoo.fit("gat", "twin", epochs=2, device="cpu", cuda_graphs="on", progress=False)
    assert zoo.fit("gat", "twin", epochs=2, device="cpu", cuda_graphs="off", progress=False).final
    argv = ["train", "--model", "gat", "--dataset", "twin", "--device", "cpu", "--out", str(tmp_path / "o")]
    assert main([*argv, "--cuda-graphs", "on"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "zoo train: error: cuda_graphs = 'on' needs a CUDA device, got cpu; use 'auto' (CUDA graphs where the "
        "device has them) or 'off'"]
    assert not list((tmp_path / "o").glob("*"))  # nothing written


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_replays_bitwise(name):
    """Each family's epoch (dropout and attention dropout, Adam with the plateau scheduler or SGD with
    momentum and weight decay) keeps the contract and replays to the eager numbers."""
    task = synthetic_task(n=24)
    optimizer, options = OPTIMISERS[sorted(FAMILIES).index(name) % 2]
    cfg = TrainConfig(optimizer=optimizer, epochs=7, loss_threshold=0.0, keep_best_state=True, **options)
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, **FAMILIES[name], **_dropouts(name))

    _replay_equals_eager(task, factory, cfg, torch.float64)


@pytest.mark.parametrize("dtype,options", [
    (torch.float64, dict(lr_scheduler="cosine", warmup_epochs=3, grad_clip_norm=0.5)),
    (torch.float32, dict(lr_scheduler="multistep", lr_scheduler_kwargs={"milestones": [4, 6]}, grad_clip_norm=1.0,
                         precision="bf16")),
])
def test_schedules_clipping_and_bf16_replay_bitwise(dtype, options):
    """The trainer options keep the contract: epoch lr schedules (per-replica device tensors), gradient
    clipping, bf16 autocast; the CPU kernels are deterministic, so float32 is bitwise too."""
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.02, epochs=9, loss_threshold=0.0, keep_best_state=True, **options)
    factory = lambda: zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, dropout=0.3, attn_dropout=0.2)

    _replay_equals_eager(task, factory, cfg, dtype)
