"""A callback-free training epoch never synchronises with the host: every family, dropout and
attention dropout, SGD and Adam, the plateau and cosine schedulers with warm-up, gradient clipping,
bf16 autocast, transductive and graph-level tasks.

The host reads the stop flags once every ``check_every`` epochs; between two reads nothing may
wait for the device.  On the CPU nothing waits, so the ops that would are counted by name
(:mod:`tests.trainer.host_sync`) over the epochs after warm-up and before the first check.
"""
from __future__ import annotations

import pytest
import torch

import zoo
from tests.trainer.test_train import graph_level_task, synthetic_task
from tests.trainer.host_sync import HostSyncCounter, window_counts
from zoo.nn.readout import GraphPool
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

EPOCHS = 7  # the window: the end of epoch 2's bookkeeping to the end of epoch 6's (4 epochs)
FAMILIES = {"gat": {"heads": 2}, "gatv2": {"heads": 2}, "gatdb": {"heads": 2}, "gcn": {},
            "graph_transformer": {"heads": 2}, "san_post_ln": {"heads": 2}, "gate": {}}
OPTIMISERS = [("adam", {"lr": 0.01, "lr_scheduler": "plateau", "lr_scheduler_kwargs": {"patience": 1}}),
              ("sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3, "lr_scheduler": "cosine",
                       "warmup_epochs": 2, "grad_clip_norm": 0.5})]


def _dropouts(name: str) -> dict:
    return {"dropout": 0.3} if name == "gcn" else {"dropout": 0.3, "attn_dropout": 0.2}


def _syncs(task, factories, seeds, cfg):
    reps, view = build_replicas(task, factories, seeds, torch.device("cpu"), torch.float32, cfg, True)
    window, results = window_counts(lambda p: train_replicas(task, reps, view, cfg, seeds, callbacks=[p]), 2, EPOCHS - 1)
    assert window.epochs == EPOCHS - 3, "the run ended before the window closed"
    return window, results


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_transductive_epochs_do_not_synchronise(name):
    task = synthetic_task(n=24)
    optimizer, options = OPTIMISERS[sorted(FAMILIES).index(name) % 2]
    cfg = TrainConfig(optimizer=optimizer, epochs=EPOCHS, check_every=100, loss_threshold=0.0, patience=3,
                      keep_best_state=True, **options)
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, **FAMILIES[name], **_dropouts(name))
    window, _ = _syncs(task, [factory, factory], [0, 1], cfg)
    assert not window.counter.counts, window.counter.report()


@pytest.mark.parametrize("name,optimizer", [("gatv2", 0), ("gcn", 1), ("gat", 1)])
def test_graph_level_epochs_do_not_synchronise(name, optimizer):
    """Graph classification, all graphs of a split in one (cached) batch."""
    task = graph_level_task()
    opt, options = OPTIMISERS[optimizer]
    cfg = TrainConfig(optimizer=opt, epochs=EPOCHS, check_every=100, loss_threshold=0.0, **options)
    factory = lambda: GraphPool(zoo.build(name, in_dim=4, out_dim=8, hidden_dim=8, num_layers=2,  # noqa: E731
                                          **_dropouts(name)), 8, 2)
    window, _ = _syncs(task, [factory, factory], [0, 1], cfg)
    assert not window.counter.counts, window.counter.report()


def test_one_replica_does_not_synchronise():
    """R = 1 runs the model unstacked (its replica token is a 0-d view, not a vmap batch)."""
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=EPOCHS, check_every=100, loss_threshold=0.0)
    factory = lambda: zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, dropout=0.3, attn_dropout=0.2)
    window, _ = _syncs(task, [factory], [0], cfg)
    assert not window.counter.counts, window.counter.report()


def test_the_host_reads_the_stop_flags_once_every_check_every_epochs():
    """With check_every = 2 the window (4 epochs) holds two checks: one read each."""
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=EPOCHS, check_every=2, loss_threshold=0.0)
    factory = lambda: zoo.build("gcn", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2)
    window, _ = _syncs(task, [factory, factory], [0, 1], cfg)
    assert window.counts() == {"Tensor.__bool__": 2}, window.counter.report()


def test_the_counter_sees_every_kind_of_host_read():
    """The counter can fail: each of these reads the device on a GPU."""
    t = torch.arange(4.0)
    reads = {"Tensor.item": lambda: t.sum().item(), "aten._local_scalar_dense": lambda: float(t.sum()),
             "Tensor.tolist": lambda: t.tolist(),
             "Tensor.__bool__": lambda: bool(t.any()), "aten.nonzero": lambda: t.nonzero(),
             "aten.equal": lambda: torch.equal(t, t), "Tensor.numpy": lambda: t.numpy(),
             "Tensor.cpu": lambda: t.cpu(), "aten.index[bool mask]": lambda: t[t > 1],
             "aten.masked_select": lambda: t.masked_select(t > 1)}
    for name, read in reads.items():
        with HostSyncCounter() as counter:
            read()
        assert name in counter.counts, (name, dict(counter.counts))
    with HostSyncCounter() as counter:
        torch.where(t > 1, t, -t).index_select(0, torch.tensor([0, 2])).sum()
    assert not counter.counts
    assert torch.Tensor.tolist is not None and t.tolist() == [0.0, 1.0, 2.0, 3.0]  # the methods are restored


def test_zoo_fits_metrics_recorder_does_not_synchronise():
    """The recorder zoo.fit always adds keeps device tensors, read once after the run."""
    from zoo.trainer.history import MetricsRecorder

    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=EPOCHS, check_every=100, loss_threshold=0.0)
    factory = lambda: zoo.build("gcn", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, dropout=0.3)
    reps, view = build_replicas(task, [factory, factory], [0, 1], torch.device("cpu"), torch.float32, cfg, True)
    recorder = MetricsRecorder()
    window, _ = window_counts(lambda p: train_replicas(task, reps, view, cfg, [0, 1],
                                                       callbacks=[p, recorder]), 2, EPOCHS - 1)
    assert not window.counter.counts, window.counter.report()
    assert recorder.epochs == list(range(EPOCHS + 1)) and len(recorder.rows["val"]) == EPOCHS + 1


@pytest.mark.parametrize("name", ["gat", "gatv2", "gcn"])
def test_bf16_clipped_step_scheduled_epochs_do_not_synchronise(name):
    task = synthetic_task(n=24)
    cfg = TrainConfig(optimizer="adam", lr=0.01, epochs=EPOCHS, check_every=100, loss_threshold=0.0,
                      precision="bf16", grad_clip_norm=0.1, lr_scheduler="step", lr_scheduler_kwargs={"step_size": 2})
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8,  # noqa: E731
                                num_layers=2, **FAMILIES[name], **_dropouts(name))
    window, _ = _syncs(task, [factory, factory], [0, 1], cfg)
    assert not window.counter.counts, window.counter.report()
