"""Plain SGD (no momentum) has no first-step case: its step reads the ``active`` mask once on the host
(to pick the in-place path) and nothing else, and a constant learning rate is made once."""
from __future__ import annotations

from typing import List

import pytest
import torch

from zoo.trainer.optim import make_optimizer


def _bool_reads(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    count = [0]
    original = torch.Tensor.__bool__

    def counted(self: torch.Tensor) -> bool:
        count[0] += 1
        return original(self)

    monkeypatch.setattr(torch.Tensor, "__bool__", counted)
    return count


def test_plain_sgd_step_reads_the_mask_once(monkeypatch: pytest.MonkeyPatch) -> None:
    params = [torch.randn(3, 4, 5), torch.randn(3, 5)]
    opt = make_optimizer("sgd", params, lr=0.1)
    opt.host_reads = True
    grads = [torch.randn_like(p) for p in params]
    active = torch.ones(3, dtype=torch.bool)
    opt.step(params, grads, active)  # the first step too: no buffer to initialise
    reads = _bool_reads(monkeypatch)
    opt.step(params, grads, active)
    assert reads[0] == 1


def test_momentum_still_tells_the_first_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """With momentum the first step copies the gradient into the buffer: the step still asks."""
    params = [torch.randn(3, 4)]
    opt = make_optimizer("sgd", params, lr=0.1, momentum=0.9)
    opt.host_reads = True
    reads = _bool_reads(monkeypatch)
    opt.step(params, [torch.randn(3, 4)], torch.ones(3, dtype=torch.bool))
    assert reads[0] > 1


def test_constant_rate_is_made_once_and_equals_the_per_step_one() -> None:
    params = [torch.randn(3, 4, dtype=torch.float64)]
    opt = make_optimizer("sgd", params, lr=0.05)
    steps = torch.ones(3, dtype=torch.float64)
    first, second = opt.lr_columns(steps), opt.lr_columns(steps + 1)
    assert first is second
    assert torch.equal(first.like(params[0]), torch.full((3, 1), 0.05, dtype=torch.float64))


@pytest.mark.parametrize("kwargs", [{"warmup_epochs": 3}, {}])
def test_a_rate_that_moves_is_made_every_step(kwargs: dict) -> None:
    params = [torch.randn(3, 4, dtype=torch.float64)]
    opt = make_optimizer("sgd", params, lr=0.05, **kwargs)
    if not kwargs:  # a scheduler's per-replica rates, updated in place between steps
        opt.replica_lr = torch.full((3,), 0.05, dtype=torch.float64)
    steps = torch.ones(3, dtype=torch.float64)
    assert opt.lr_columns(steps) is not opt.lr_columns(steps)


def test_masked_plain_sgd_freezes_stopped_replicas() -> None:
    params = [torch.randn(3, 4, 5)]
    before = params[0].clone()
    opt = make_optimizer("sgd", params, lr=0.1)
    opt.host_reads = True
    grad = torch.randn(3, 4, 5)
    opt.step(params, [grad], torch.tensor([True, False, True]))
    assert torch.equal(params[0][1], before[1])
    assert torch.equal(params[0][0], before[0].addcmul(torch.tensor(0.1), grad[0], value=-1))
