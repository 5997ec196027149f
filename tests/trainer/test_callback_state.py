"""Callbacks with ``state_dict`` / ``load_state_dict`` are saved with the loop's resume state and get
it back on resume: a resumed run's callback ends as an uninterrupted run's does."""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.rescale import DynamicRescaling
from zoo.trainer.config import TrainConfig
from zoo.trainer.history import MetricsRecorder
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.trainer.resume import ResumeFile, ResumePolicy, stateful_callbacks

TASK = synthetic_task(n=24)
CFG = TrainConfig(optimizer="adam", lr=0.01, epochs=8, loss_threshold=0.0)


class Stop(Exception):
    pass


class StopAt:
    """Interrupts the run after state ``epoch`` was evaluated (a kill, as far as the loop knows)."""

    syncs_host = False

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, state) -> None:
        if state.epoch == self.epoch:
            raise Stop


def _run(callbacks, resume=None):
    factory = lambda: zoo.build("gcn", in_dim=TASK.num_features, out_dim=TASK.num_classes,  # noqa: E731
                                hidden_dim=8, num_layers=2)
    reps, view = build_replicas(TASK, [factory, factory], [0, 1], torch.device("cpu"), torch.float64, CFG, True)
    return train_replicas(TASK, reps, view, CFG, [0, 1], callbacks=callbacks, resume=resume)


def test_a_callbacks_state_survives_a_resume(tmp_path):
    whole = MetricsRecorder()
    _run([whole])
    policy = ResumePolicy(seconds=None, epochs=3)  # saves after the steps of epochs 2 and 5
    with pytest.raises(Stop):
        _run([MetricsRecorder(), StopAt(4)], ResumeFile(tmp_path / "r.pt", policy))
    again = MetricsRecorder()
    results = _run([again], ResumeFile(tmp_path / "r.pt", policy))
    assert results[0].extra["resumed_at_epoch"] == 3  # it resumed ...
    assert again.epochs == whole.epochs == list(range(CFG.epochs + 1))  # ... with the epochs before it
    assert again.rows == whole.rows


def test_callbacks_are_keyed_by_class_whatever_comes_and_goes():
    a, b, plain = DynamicRescaling(), DynamicRescaling(), StopAt(1)
    assert stateful_callbacks([plain, a, MetricsRecorder(), b]).keys() == {"DynamicRescaling", "MetricsRecorder",
                                                                           "DynamicRescaling#1"}
    assert stateful_callbacks([a, b])["DynamicRescaling#1"] is b
