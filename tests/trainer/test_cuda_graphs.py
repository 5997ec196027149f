"""The replayed epoch (``cuda_graphs``) on the CPU, through a double of the capture that checks the
static-buffer contract op by op (:mod:`tests.trainer.capture_double`): the records are bitwise the
eager ones at float64 for every ``check_every``, with dropout, Adam / AdamW / SGD, the plateau
scheduler and replicas stopping for every reason; a resumed run too; the double catches a rebound
state tensor, a per-epoch host number, a host read, a freed input and a frozen host value; the
self-check and each failure that makes a group fall back (a capture or a replay that raises, a
replay differing from the eager epoch, a torch whose graphs cannot capture the replicas' streams);
callbacks see copies of the static buffers; the modes."""
from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import zoo
import zoo.trainer.graphs as graphs
from tests.trainer.test_train import graph_level_task, synthetic_task
from tests.trainer.capture_double import CheckedBackend, ContractError
from zoo.trainer.graphs import DEFAULT_ONLY, PER_CAPTURE, PER_GENERATOR, GraphFallback
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
    assert {r.extra["cuda_graphs"] for r in replayed[0]} == {"replayed"}
    assert {r.extra["cuda_graphs"] for r in eager[0]} == {"eager"}
    reasons = {r.stop_reason for r in eager[0]}
    assert "diverged" in reasons and len(reasons) >= 3  # replicas stop at different epochs, for different reasons
    _same(eager, replayed)


def _replay_equals_eager(task, factory, cfg, dtype):
    """Two replicas trained through the checked capture double and eagerly: records and final
    parameters bitwise equal, every epoch after the warm-up replayed (both halves), and once more by the
    self-check."""
    def run(backend):
        reps, view = build_replicas(task, [factory, factory], [0, 1], torch.device("cpu"), dtype, cfg, True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(graphs, "capture_backend", lambda device: backend)
            results = train_replicas(task, reps, view, cfg, [0, 1])
        return results, [p.detach().clone() for p in reps.params]

    backend = CheckedBackend()
    replayed = run(backend)
    assert [c.replays for c in backend.captures] == [cfg.epochs - graphs.WARMUP + 1] * 2
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
        del r.extra["resumed_at_epoch"], r.extra["resumed_elapsed_s"], r.extra["resumed_cpu_s"]
    _same(straight, resumed)


def test_a_rebound_state_tensor_fails_the_self_check(monkeypatch):
    """``state.best_val = new`` (as the bookkeeping once did) would leave a graph writing the old tensor."""
    real = Bookkeeping.update

    def rebinding(self, state, epoch, ev, stamp=None):
        out = real(self, state, epoch, ev, stamp)
        state.best_val = state.best_val.clone()
        return out

    monkeypatch.setattr(Bookkeeping, "update", rebinding)
    with pytest.raises(GraphFallback, match="self-check at epoch 3 found the replayed epoch differing") as e:
        _run("transductive", CheckedBackend())
    assert not e.value.poisoned


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


def test_a_capture_that_throws_falls_back_and_on_fails(monkeypatch):
    """A host read in the epoch makes the capture fail: ``auto`` raises :class:`GraphFallback` (poisoned:
    the group must be run again in a fresh process), never training on here; ``on`` is an error."""
    real = LoopState.keep_best
    seen = []

    def reading(self, params, improved):
        bool(improved.any())  # a host read: no CUDA capture can hold it
        seen.append(1)
        real(self, params, improved)

    monkeypatch.setattr(LoopState, "keep_best", reading)
    backend = CheckedBackend()
    with pytest.raises(GraphFallback, match=r"could not be captured \(ContractError: a captured epoch reads the device "
                                            "on the host") as e:
        _run("transductive", backend)
    assert e.value.poisoned and "in a fresh process" in str(e.value)
    assert len(seen) == graphs.WARMUP + 1 and [c.replays for c in backend.captures] == [0]  # nothing ran after it
    with pytest.raises(RuntimeError, match="cuda_graphs = 'on': the training epoch could not be captured"):
        _run("transductive", CheckedBackend(), mode="on")
    thrown = CheckedBackend(fail=RuntimeError("operation not permitted when stream is capturing"))
    with pytest.raises(GraphFallback, match=r"could not be captured \(RuntimeError: operation not permitted when stream "
                                            r"is capturing\)"):
        _run("graph", thrown)


def test_a_replay_that_throws_falls_back_and_on_fails():
    backend = CheckedBackend(fail_replay=(4, RuntimeError("CUDA error: an illegal memory access was encountered")))
    with pytest.raises(GraphFallback, match=r"the replay of epoch 5 raised RuntimeError: CUDA error: an illegal") as e:
        _run("transductive", backend, epochs=8)
    assert e.value.poisoned
    with pytest.raises(RuntimeError, match="cuda_graphs = 'on': the replay of epoch 3 raised RuntimeError"):
        _run("transductive", CheckedBackend(fail_replay=(2, RuntimeError("boom"))), mode="on", epochs=8)


def test_a_kernel_left_out_of_the_graph_fails_the_self_check():
    """An op that a replay does not run (a kernel launched off the capture stream is not captured): the
    replayed epoch's parameters differ from the eager epoch's, so the group falls back before any
    replayed number is used (not poisoned: nothing raised on the device); ``on`` is an error."""
    with pytest.raises(GraphFallback, match=r"self-check at epoch 3 .*differs from the eager epoch by up to") as e:
        _run("transductive", CheckedBackend(uncaptured="aten.where.self_out"))
    assert not e.value.poisoned
    with pytest.raises(RuntimeError, match="cuda_graphs = 'on': the self-check at epoch 3"):
        _run("transductive", CheckedBackend(uncaptured="aten.where.self_out"), mode="on")


def test_off_never_captures():
    eager = _run("graph", None)
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
        batched = _run("graph", backend, batch_size=3, epochs=5)
    assert backend.captures == [] and any("mini-batches (batch_size = 3)" in str(w.message) for w in caught)
    assert batched[0][0].extra["cuda_graphs"].startswith("eager (mini-batches (batch_size = 3) are collated")
    with pytest.raises(ValueError, match=r"cuda_graphs = 'on' cannot capture this run: mini-batches"):
        _run("graph", CheckedBackend(), mode="on", batch_size=3, epochs=5)
    # a run too short to warm up is eager
    short = CheckedBackend()
    assert _run("transductive", short, epochs=graphs.WARMUP)[0][0].extra["cuda_graphs"] == "eager"
    assert short.captures == []


class KeepsMetrics:
    """A callback keeping the metric tensors it is shown, without copying them."""

    syncs_host = False

    def __init__(self):
        self.kept = []

    def on_epoch_end(self, state):
        self.kept.append((state.metrics["val"], state.metrics["val_loss"]))


def test_callbacks_see_copies_of_the_static_buffers():
    """Under graphs the evaluation's outputs are the same tensors at every replay; a callback keeping
    them (as an eager epoch's fresh tensors may be kept) sees each epoch's values, not the last one's."""
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.02, epochs=9, loss_threshold=0.0)
    factory = lambda: zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, dropout=0.3)

    def kept(backend):
        cb = KeepsMetrics()
        reps, view = build_replicas(task, [factory, factory], [0, 1], torch.device("cpu"), torch.float64, cfg, True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(graphs, "capture_backend", lambda device: backend)
            train_replicas(task, reps, view, cfg, [0, 1], callbacks=[cb])
        return torch.stack([torch.cat(pair) for pair in cb.kept])

    backend = CheckedBackend()
    replayed = kept(backend)
    assert backend.captures[0].replays >= cfg.epochs - graphs.WARMUP
    eager = kept(None)
    assert len(set(eager[:, 0].tolist())) > 1  # the values move from epoch to epoch
    torch.testing.assert_close(replayed, eager, rtol=0, atol=0)


class _Graph:
    """A stand-in for ``torch.cuda.CUDAGraph``: what registering a generator says."""

    warning = None

    def register_generator_state(self, generator):
        if self.warning:
            warnings.warn(self.warning, UserWarning)


def test_rng_support_of_a_torch(monkeypatch):
    """Without ``register_generator_state`` only the default generator is captured; with it, generator
    states are per generator, or per capture where registration is deprecated (lazy)."""
    monkeypatch.setattr(torch.cuda, "default_generators", (torch.Generator(),))
    assert graphs.rng_support(object) == DEFAULT_ONLY
    assert graphs.rng_support(torch.cuda.CUDAGraph) == DEFAULT_ONLY  # a CPU build: no CUDA graphs at all
    assert graphs.rng_support(_Graph) == PER_GENERATOR  # not probed: the weaker reading
    assert graphs.rng_support(_Graph, torch.device("cuda", 0)) == PER_GENERATOR

    class Lazy(_Graph):
        warning = "register_generator_state is deprecated: generators are registered lazily"

    assert graphs.rng_support(Lazy, torch.device("cuda", 0)) == PER_CAPTURE


def test_a_torch_without_graph_safe_replica_streams_trains_eagerly():
    """Graphs that capture only the default generator cannot replay the replicas' own dropout streams
    (on such a torch a capture raises, and leaves the default generator in capture mode): ``auto``
    trains eagerly and says why, ``on`` refuses; a run without dropout is still captured."""
    old = CheckedBackend(rng=DEFAULT_ONLY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results, _ = _run("transductive", old, epochs=8)
    assert old.captures == [] and results[0].extra["cuda_graphs"].startswith(
        "eager (this torch (") and "captures only the default random generator" in str(caught[-1].message)
    _same(_run("transductive", None, epochs=8), (results, _))
    with pytest.raises(ValueError, match="cuda_graphs = 'on' cannot capture this run: this torch"):
        _run("transductive", CheckedBackend(rng=DEFAULT_ONLY), mode="on")
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="sgd", epochs=6, loss_threshold=0.0)
    factory = lambda: zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2)
    no_dropout = CheckedBackend(rng=DEFAULT_ONLY)
    reps, view = build_replicas(task, [factory], [0], torch.device("cpu"), torch.float64, cfg, True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graphs, "capture_backend", lambda device: no_dropout)
        assert train_replicas(task, reps, view, cfg, [0])[0].extra["cuda_graphs"] == "replayed"


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


def test_zoo_fit_trains_again_eagerly_after_a_self_check_difference(monkeypatch):
    """In the user's process: a replay that differs (nothing raised on the device) is fitted again
    eagerly with one warning; a capture that raised asks for a fresh process."""
    options = dict(epochs=8, device="cpu", progress=False, dropout=0.2, optimizer="adam", lr=0.02, dtype="float64")
    eager = zoo.fit("gatv2", "twin", cuda_graphs="off", **options)
    monkeypatch.setattr(graphs, "capture_backend", lambda device: CheckedBackend(uncaptured="aten.where.self_out"))
    with pytest.warns(RuntimeWarning, match="self-check at epoch 3 .*training again eagerly from the start"):
        fell = zoo.fit("gatv2", "twin", **options)
    assert fell.results[0].extra["cuda_graphs"].startswith("fell back (the self-check at epoch 3")
    assert fell.final == eager.final and (fell.metrics["val"] == eager.metrics["val"]).all()
    monkeypatch.setattr(graphs, "capture_backend", lambda device: CheckedBackend(fail=RuntimeError("capture broke")))
    with pytest.raises(RuntimeError, match=r"zoo.fit: the training epoch could not be captured \(RuntimeError: capture "
                                           r"broke\); after a failed capture .* new Python process"):
        zoo.fit("gatv2", "twin", **options)
