"""The first layer's CSR weight gradient left to a plain SGD step (zoo/trainer/epoch.py's
WeightGradDeferral, zoo/ops/sparse_linear.py's DeferredGrad): the same numbers as computing it."""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

import zoo
from tests.trainer.test_train import synthetic_task
from zoo.ops import sparse_linear
from zoo.ops.csr import compiled_csr_mm
from zoo.trainer.config import TrainConfig
from zoo.trainer.epoch import WeightGradDeferral
from zoo.trainer.loop import train_replicas
from zoo.trainer.replicas import build_replicas

pytestmark = pytest.mark.skipif(compiled_csr_mm(torch.device("cpu"), torch.float32) is None,
                                reason="the compiled CPU kernels are not available")


def _bag_of_words(x: torch.Tensor, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(x.shape, generator=g) < 0.03
    x = keep * torch.rand(x.shape, generator=g)
    return x / x.sum(1, keepdim=True).clamp(min=1e-6)


def _spy(monkeypatch: pytest.MonkeyPatch) -> Dict[str, int]:
    calls = {"folded": 0, "computed": 0}
    step, compute = sparse_linear.DeferredGrad.sgd_step, sparse_linear.DeferredGrad.compute

    def counted_step(self, *args):
        done = step(self, *args)
        calls["folded"] += done
        return done

    def counted_compute(self):
        calls["computed"] += 1
        return compute(self)

    monkeypatch.setattr(sparse_linear.DeferredGrad, "sgd_step", counted_step)
    monkeypatch.setattr(sparse_linear.DeferredGrad, "compute", counted_compute)
    return calls


def _train(cfg: TrainConfig, dtype: torch.dtype) -> tuple:
    task = synthetic_task(n=60, features=300, classes=3)
    task.data.x = _bag_of_words(task.data.x)
    seeds = [0, 1, 2, 3]
    factories = [(lambda: zoo.build("gatv2", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=16,
                                    num_layers=2, init="xavier")) for _ in seeds]
    reps, view = build_replicas(task, factories, seeds, torch.device("cpu"), dtype, cfg, True)
    results = train_replicas(task, reps, view, cfg, seeds)
    return [p.detach().clone() for p in reps.params], [(r.metrics, r.val_loss, r.train_loss, r.best_epoch, r.epochs_run,
                                                        r.stop_reason) for r in results]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("patience", [None, 3])  # 3: the replicas stop at epochs 3, 5, 8 and 3
def test_the_folded_step_trains_as_the_computed_gradient(monkeypatch, dtype, patience):
    cfg = TrainConfig(optimizer="sgd", lr=2.0, epochs=12, loss_threshold=0.0, patience=patience)
    calls = _spy(monkeypatch)
    folded_params, folded_results = _train(cfg, dtype)
    assert calls["folded"] > 0  # the fused step served (the first epoch learns, the others fold)
    if patience is not None:
        assert calls["computed"] > 0  # replicas stopped: the masked step computed the gradient first
    monkeypatch.setattr(sparse_linear._Deferring, "takes", staticmethod(lambda grad: False))
    params, results = _train(cfg, dtype)
    assert all(torch.equal(a, b) for a, b in zip(folded_params, params))
    assert folded_results == results


def _vmapped_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.func.vmap(lambda w: sparse_linear.linear(x, w))(weight)


def test_a_weight_with_another_use_is_never_deferred():
    x = _bag_of_words(torch.ones(30, 200))
    weight = torch.randn(3, 8, 200, requires_grad=True)

    def loss(second_use: bool) -> torch.Tensor:
        out = _vmapped_linear(x, weight).pow(2).sum()
        return out + weight.square().sum() if second_use else out

    for second_use in (True, False):
        deferral = WeightGradDeferral()
        want = torch.autograd.grad(loss(second_use), [weight])
        got: List[torch.Tensor] = []
        for _ in range(3):
            grads, deferred = deferral.grads(loss(second_use), [weight])
            for d in deferred.values():
                d.compute()
            got.append(grads[0])
        assert deferral.holds is (not second_use)
        assert all(torch.equal(g, want[0]) for g in got)
