"""How often the host reads the stop flags (``check_every``) changes no number: the same records,
kept states and final parameters for every K, bitwise at float64, with replicas stopping at
different epochs for every reason (divergence, loss threshold, patience, the last epoch)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import zoo
from tests.bench.run.test_train import graph_level_task, synthetic_task
from zoo.nn.readout import GraphPool
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas
from zoo.trainer.resume import CheckpointPolicy, Checkpointer

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


def _train(task, cfg, graph=False, checkpoint=None):
    scales = [1.0, 1e200, 1.0, 3.0]
    reps, view = build_replicas(task, [_factory(task, s, graph) for s in scales], SEEDS, torch.device("cpu"),
                                torch.float64, cfg, True)
    results = train_replicas(task, reps, view, cfg, SEEDS, checkpoint=checkpoint)
    return results, [p.detach().clone() for p in reps.params]


def _comparable(result):
    out = dataclasses.asdict(result)
    for key in ("wall_time_s", "time_per_epoch_s"):
        out.pop(key)
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
    "transductive": (synthetic_task, False, dict(optimizer="adam", lr=0.05, epochs=30, patience=12, loss_threshold=0.2,
                                                 lr_scheduler="plateau", lr_scheduler_kwargs={"patience": 2})),
    "graph": (graph_level_task, True, dict(optimizer="sgd", lr=0.1, momentum=0.9, epochs=30, patience=5,
                                           loss_threshold=0.3)),
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_records_do_not_depend_on_check_every(kind):
    make, graph, options = CONFIGS[kind]
    task = make()
    runs = {k: _train(task, TrainConfig(check_every=k, keep_best_state=True, **options), graph) for k in (1, 7, 25)}
    reasons = [r.stop_reason for r in runs[1][0]]
    print(kind, reasons, [r.epochs_run for r in runs[1][0]])
    assert "diverged" in reasons and len(set(r.epochs_run for r in runs[1][0])) >= 3
    _same(runs[1], runs[7])
    _same(runs[1], runs[25])
