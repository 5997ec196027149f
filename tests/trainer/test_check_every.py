"""How often the host reads the stop flags (``check_every``) changes no number: the same records,
kept states and final parameters for every K, bitwise at float64, with replicas stopping at
different epochs for every reason (divergence, loss threshold, patience, the last epoch), with and
without an lr schedule, warm-up and gradient clipping."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import zoo
from tests.trainer.test_train import graph_level_task, synthetic_task
from tests.trainer.crash import Crash, crash_after_save
from zoo.nn.readout import GraphPool
from zoo.trainer.config import TrainConfig
from zoo.trainer.history import MetricsRecorder
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.trainer.resume import ResumePolicy, ResumeFile

SEEDS = [0, 1, 2, 3]


def _factory(task, scale: float, graph: bool):
    def build():
        if graph:
            model = GraphPool(zoo.build("gatv2", in_dim=4, out_dim=8, hidden_dim=8, num_layers=2, dropout=0.2), 8, 2)
        else:
            model = zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,
                              num_layers=2, dropout=0.2, attn_dropout=0.1)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(scale)  # 1e200: the first loss overflows, the replica diverges at epoch 0
        return model
    return build


def _train(task, cfg, graph=False, resume=None):
    scales = [1.0, 1e200, 1.0, 3.0]
    reps, view = build_replicas(task, [_factory(task, s, graph) for s in scales], SEEDS, torch.device("cpu"),
                                torch.float64, cfg, True)
    results = train_replicas(task, reps, view, cfg, SEEDS, resume=resume)
    return results, [p.detach().clone() for p in reps.params]


def _comparable(result):
    out = dataclasses.asdict(result)
    for key in ("wall_time_s", "time_per_epoch_s"):
        out.pop(key)
    out["extra"].pop("cuda_graphs", None)  # how the epochs ran (replayed / eager): the numbers are the same
    return out


def _same(a, b):
    (ra, pa), (rb, pb) = a, b
    for x, y in zip(ra, rb):
        x, y = _comparable(x), _comparable(y)
        best_x, best_y = x.pop("best_state"), y.pop("best_state")
        assert x == y  # == on every float: bitwise
        assert best_x.keys() == best_y.keys() and all(torch.equal(best_x[k], best_y[k]) for k in best_x)
    assert all(torch.equal(u, v) for u, v in zip(pa, pb))


CONFIGS = {
    "transductive": (synthetic_task, False, dict(optimizer="adam", lr=0.02, epochs=30, patience=8, loss_threshold=1.0,
                                                 select="val_loss",
                                                 lr_scheduler="plateau", lr_scheduler_kwargs={"patience": 2})),
    "graph": (graph_level_task, True, dict(optimizer="sgd", lr=0.1, momentum=0.9, epochs=30, patience=5,
                                           loss_threshold=0.3)),
    "scheduled": (synthetic_task, False, dict(optimizer="sgd", lr=0.1, momentum=0.9, epochs=30, patience=6,
                                              loss_threshold=0.5, lr_scheduler="cosine", warmup_epochs=3,
                                              grad_clip_norm=0.5)),
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_records_do_not_depend_on_check_every(kind):
    make, graph, options = CONFIGS[kind]
    task = make()
    runs = {k: _train(task, TrainConfig(check_every=k, keep_best_state=True, **options), graph) for k in (1, 7, 25)}
    reasons = [r.stop_reason for r in runs[1][0]]
    # replicas stop at different epochs, for different reasons (transductive: one of each)
    assert "diverged" in reasons and len(set(r.epochs_run for r in runs[1][0])) >= 3
    assert kind != "transductive" or sorted(reasons) == ["converged", "diverged", "max_epochs", "patience"]
    _same(runs[1], runs[7])
    _same(runs[1], runs[25])


@pytest.mark.parametrize("kind", ["graph", "scheduled"])
def test_a_resumed_run_matches_for_every_check_every(tmp_path, monkeypatch, kind):
    """The resume state is written at a host check (a due one makes it); resumed with another K, the
    run gives bitwise the records of an uninterrupted run checking every epoch (with an lr
    schedule: its per-replica epochs and rates are in the resume state)."""
    make, graph, options = CONFIGS[kind]
    task = make()
    straight = _train(task, TrainConfig(check_every=1, keep_best_state=True, **options), graph)

    path = tmp_path / "group.pt"
    real_save = crash_after_save(monkeypatch)
    with pytest.raises(Crash, match="epoch 3"):
        _train(task, TrainConfig(check_every=25, keep_best_state=True, **options), graph,
               ResumeFile(path, ResumePolicy(None, 3)))
    monkeypatch.setattr(ResumeFile, "save", real_save)
    resumed = _train(task, TrainConfig(check_every=7, keep_best_state=True, **options), graph,
                     ResumeFile(path, ResumePolicy(None, 1000)))
    assert {r.extra["resumed_at_epoch"] for r in resumed[0]} == {3}
    for r in resumed[0]:
        del r.extra["resumed_at_epoch"], r.extra["resumed_elapsed_s"], r.extra["resumed_cpu_s"]
    _same(straight, resumed)


class _Reader:
    """A callback that reads the host (the default, ``syncs_host`` unset)."""

    def __init__(self):
        self.epochs = []

    def on_epoch_end(self, state):
        self.epochs.append((state.epoch, state.active.tolist()))


def test_callbacks_see_the_same_epochs_for_every_check_every():
    """zoo.fit's MetricsRecorder keeps device tensors (the loop runs on to its check, the recorder
    drops those epochs); a callback that reads the host makes the loop check every epoch."""
    make, graph, options = CONFIGS["graph"]
    task = make()
    seen = {}
    for k in (1, 25):
        recorder, reader = MetricsRecorder(), _Reader()
        cfg = TrainConfig(check_every=k, **options)
        reps, view = build_replicas(task, [_factory(task, s, graph) for s in (1.0, 1e200, 1.0, 3.0)], SEEDS,
                                    torch.device("cpu"), torch.float64, cfg, True)
        train_replicas(task, reps, view, cfg, SEEDS, callbacks=[recorder] if k == 25 else [recorder, reader])
        seen[k] = (recorder.epochs, {key: torch.tensor(v) for key, v in recorder.rows.items()})
        if k == 1:
            last_stop = max(e for e, active in reader.epochs if any(active)) + 1
            assert reader.epochs[-1][0] == last_stop < cfg.epochs  # no epoch past the last stop
    assert seen[1][0] == seen[25][0] == list(range(len(seen[1][0])))
    for key, rows in seen[1][1].items():
        assert torch.equal(rows.isnan(), seen[25][1][key].isnan())
        assert torch.equal(rows.nan_to_num(), seen[25][1][key].nan_to_num())


def test_check_every_defaults_and_validation():
    from zoo.trainer.loop import _check_every

    cpu, gpu = torch.device("cpu"), torch.device("cuda")  # a device object only: no GPU needed
    assert _check_every(TrainConfig(), cpu, []) == 1  # a CPU read waits for nothing
    assert _check_every(TrainConfig(), gpu, []) == 25
    assert _check_every(TrainConfig(check_every=7), cpu, [MetricsRecorder()]) == 7
    assert _check_every(TrainConfig(check_every=7), gpu, [MetricsRecorder(), _Reader()]) == 1
    for bad in (0, -3, 2.5, True, "25"):
        with pytest.raises(ValueError, match="check_every must be"):
            TrainConfig(check_every=bad)
