"""The replayed epoch on the real datasets' paths, through the CPU double of the capture
(:mod:`tests.trainer.capture_double`), bitwise against eager: Cora with 8 heads and input dropout drawn
at the bag-of-words non-zeros (one replica: the dropped input's CSR form feeds the first layer),
Cornell's first layer as a CSR product of stacked weights with attention dropout, PubMed with 8 heads
and dropout; Adam with the plateau or a cosine schedule, SGD with momentum.  Each run's trace must
take the path it is there for (a counted call; so a change that drops the path is seen).  Float64, so the
double's bitwise comparison is the contract's, not the rounding's."""
from __future__ import annotations

import pytest
import torch

import zoo
import zoo.ops.sparse_linear as sparse_linear
import zoo.trainer.graphs as graphs
from tests.trainer.capture_double import CheckedBackend
from zoo.ops.dropout import ReplicaRandomness
from tests.trainer.test_check_every import _same
from zoo.datasets import load
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

CASES = {
    # name: (dataset, replicas, model options, train options, the call the path must make)
    "cora_8_heads_sparse_input_dropout": (
        "cora", 1, dict(name="gat", heads=8, hidden_dim=64, dropout=0.6, attn_dropout=0.6),
        dict(optimizer="adam", lr=0.005, weight_decay=5e-4, lr_scheduler="plateau",
             lr_scheduler_kwargs={"patience": 1}), (sparse_linear, "_csr_linear_float32")),
    "cornell_csr_first_layer": (
        "cornell", 3, dict(name="gatv2", heads=1, hidden_dim=64, attn_dropout=0.3),
        dict(optimizer="sgd", lr=0.05, momentum=0.9, lr_scheduler="cosine", warmup_epochs=2),
        (sparse_linear, "_csr_linear_float32")),
    "pubmed_8_heads_dropout_small": (
        "pubmed", 1, dict(name="gat", heads=8, hidden_dim=16, dropout=0.6, attn_dropout=0.6),
        dict(optimizer="adam", lr=0.01, lr_scheduler="plateau"), (ReplicaRandomness, "sparse_dropped")),
    "pubmed_8_heads_dropout": (
        "pubmed", 2, dict(name="gat", heads=8, hidden_dim=64, dropout=0.6, attn_dropout=0.6),
        dict(optimizer="adam", lr=0.01, lr_scheduler="cosine"), (ReplicaRandomness, "sparse_dropped")),
}


def _train(task, replicas, model, train, backend, spied=None):
    cfg = TrainConfig(epochs=graphs.WARMUP + 4, loss_threshold=0.0, keep_best_state=True, **train)
    options = dict(model)
    name = options.pop("name")
    factory = lambda: zoo.build(name, in_dim=task.num_features, out_dim=task.num_classes, num_layers=2,  # noqa: E731
                                **options)
    seeds = list(range(replicas))
    reps, view = build_replicas(task, [factory] * replicas, seeds, torch.device("cpu"), torch.float64, cfg, True)
    calls = [0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graphs, "capture_backend", lambda device: backend)
        if spied is not None:
            real = getattr(*spied)

            def counted(*args, **kwargs):
                calls[0] += 1
                return real(*args, **kwargs)

            mp.setattr(*spied, counted)
        results = train_replicas(task, reps, view, cfg, seeds)
    return results, [p.detach().clone() for p in reps.params], calls[0]


@pytest.mark.parametrize("case", [
    "cora_8_heads_sparse_input_dropout", "cornell_csr_first_layer", pytest.param("pubmed_8_heads_dropout_small", marks=pytest.mark.slow),
    pytest.param("pubmed_8_heads_dropout", marks=pytest.mark.slow)])
def test_real_data_paths_replay_bitwise(case, mirror):
    dataset, replicas, model, train, spied = CASES[case]
    task = load(dataset)
    backend = CheckedBackend()
    *replayed, calls = _train(task, replicas, model, train, backend, spied)
    assert [c.replays for c in backend.captures] == [5, 5]  # 4 replayed epochs, and the self-check's
    assert {r.extra["cuda_graphs"] for r in replayed[0]} == {"replayed"}
    assert calls >= graphs.WARMUP + 5  # the path ran in every epoch (and under the capture double's replays)
    _same(_train(task, replicas, model, train, None)[:2], replayed)
