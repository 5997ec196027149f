"""The benchmark trainer is a plain PyTorch loop, state by state.

A 2-layer SAN with input dropout, Adam with the L2 term (and a linear warm-up, the nonlocal Post-LN recipe):
``zoo.trainer.loop`` and a textbook loop (``torch.optim.Adam``, eval-mode evaluation of every state, one
full-batch step per epoch) drawing the same dropout masks give the same train / val / test accuracies and
validation losses at every epoch, in float64.  So a gap between the suite's numbers and a plain loop's is not
the trainer's: the nonlocal probe traced its "86 vs 87+" to the split each run uses.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.ops.dropout import ReplicaRandomness, replica_randomness


class _Recorder:
    def __init__(self):
        self.rows = []

    def on_epoch_end(self, state):
        m = state.metrics
        self.rows.append([float(m[k][0]) for k in ("train", "val", "test", "val_loss")])


def _plain_loop(model, task, seed, lr, wd, warmup, epochs):
    d = task.data
    x = d.x.to(torch.float64)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    rng, token = ReplicaRandomness([seed]), torch.tensor(0)
    rows = []
    for epoch in range(epochs + 1):
        model.eval()
        with torch.no_grad():
            logits = model(d.edge_index, x)
            pred = logits.argmax(-1)
            rows.append([float((pred[m] == d.y[m]).double().mean()) for m in (d.train_mask, d.val_mask, d.test_mask)]
                        + [float(F.cross_entropy(logits[d.val_mask], d.y[d.val_mask]))])
        if epoch == epochs:
            break
        if warmup:
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (epoch + 1) / warmup)
        model.train()
        opt.zero_grad()
        with replica_randomness(rng, token):
            out = model(d.edge_index, x)
        F.cross_entropy(out[d.train_mask], d.y[d.train_mask]).backward()
        opt.step()
    return rows


@pytest.mark.parametrize("name,lr,warmup", [("san_pre_ln", 1e-2, 0), ("san_post_ln", 1e-2, 5)])
def test_zoo_trainer_equals_a_plain_loop(name, lr, warmup):
    task = synthetic_task(n=60, features=6)
    seed, wd, epochs = 3, 5e-4, 25

    def factory():
        return zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8, num_layers=2,
                         input_dropout=0.5)

    cfg = TrainConfig(optimizer="adam", lr=lr, weight_decay=wd, warmup_epochs=warmup, epochs=epochs,
                      loss_threshold=-1.0)
    reps, view = build_replicas(task, [factory], [seed], torch.device("cpu"), torch.float64, cfg, True)
    recorder = _Recorder()
    train_replicas(task, reps, view, cfg, [seed], callbacks=[recorder])

    torch.manual_seed(seed)
    plain = _plain_loop(factory().double(), task, seed, lr, wd, warmup, epochs)
    assert len(recorder.rows) == len(plain) == epochs + 1
    for e, (ours, theirs) in enumerate(zip(recorder.rows, plain)):
        assert ours[:3] == theirs[:3], f"epoch {e}: accuracies differ"
        assert ours[3] == pytest.approx(theirs[3], rel=1e-9, abs=1e-12), f"epoch {e}: val loss differs"
    # the run trained (not a frozen model agreeing with itself)
    assert abs(plain[-1][3] - plain[0][3]) > 1e-2
