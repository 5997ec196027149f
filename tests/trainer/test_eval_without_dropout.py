"""Validation / test accuracies are measured in evaluation mode, with no dropout drawn.

The trainer reuses the training-mode logits for evaluation when the model draws no dropout; it
read only the top-level ``dropout`` / ``attn_dropout``, so SAN's ``input_dropout`` (the nonlocal
suites' 0.5) stayed on while the val / test accuracies were measured.
"""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas, draws_dropout


@pytest.mark.parametrize("kwargs", [{"input_dropout": 0.9}, {"attn_dropout": 0.9}])
def test_san_scores_are_eval_mode_scores(kwargs):
    task = synthetic_task(n=60, features=6)
    cfg = TrainConfig(optimizer="adam", lr=1e-3, epochs=0)
    factories = [lambda: zoo.build("san_pre_ln", in_dim=task.num_features, out_dim=task.num_classes,
                                   hidden_dim=8, num_layers=2, **kwargs)]
    reps, view = build_replicas(task, factories, [0], torch.device("cpu"), torch.float64, cfg, True)
    (result,) = train_replicas(task, reps, view, cfg, [0])
    with torch.no_grad():
        expected = view.scores(task, reps.forward(*view.inputs(), train=False))[0].tolist()
    assert [result.metrics[s] for s in ("train", "val", "test")] == pytest.approx(expected, abs=1e-12)


def test_draws_dropout_reads_every_rate():
    def san(**kw):
        return zoo.build("san_pre_ln", in_dim=4, out_dim=2, hidden_dim=8, num_layers=1, **kw)

    assert draws_dropout(san(input_dropout=0.5))
    assert draws_dropout(san(attn_dropout=0.5))
    assert draws_dropout(san(dropout=0.5))
    assert not draws_dropout(san())
    assert not draws_dropout(zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2))
    assert draws_dropout(torch.nn.Sequential(torch.nn.Dropout(0.1)))
    assert not draws_dropout(torch.nn.Sequential(torch.nn.Dropout(0.0)))
