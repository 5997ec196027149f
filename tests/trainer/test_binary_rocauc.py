"""A binary ROC-AUC task with class labels (minesweeper, tolokers) trains: the model gets one
logit, which the trainer's binary cross-entropy and the ROC-AUC score both read.  Two logits
failed every run with "2 outputs for 1 binary targets"."""
from __future__ import annotations

import math

import zoo
from zoo.trainer.cells import output_size


def test_binary_class_labels_get_one_logit_and_train(mirror):
    task = zoo.datasets.load("minesweeper", split=0)
    assert task.metric == "rocauc" and task.data.y.dim() == 1 and output_size(task) == 1
    history = zoo.fit("gcn", "minesweeper", num_layers=2, hidden_dim=8, epochs=2, split=0)
    final = history.final[0]
    assert final["stop_reason"] == "max_epochs" and 0 < final["test"] < 1 and math.isfinite(final["train_loss"])
