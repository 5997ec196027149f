"""The loop's per-replica state (zoo.trainer.state) and its bookkeeping objects (zoo.trainer.stopping):
tensor-only updates, the stop reasons' precedence, and the resume checkpoint's loop entries."""
from __future__ import annotations

import math

import torch

from zoo.trainer.config import TrainConfig
from zoo.trainer.state import STOP_REASONS, LoopState
from zoo.trainer.stopping import Evaluation, bookkeeping


def _evaluation(train_loss, val_metric, val_loss=None):
    train_loss = torch.tensor(train_loss, dtype=torch.float64)
    val = torch.tensor(val_metric, dtype=torch.float64)
    scores = torch.stack([val, val, val], 1)
    val_loss = torch.zeros_like(train_loss) if val_loss is None else torch.tensor(val_loss, dtype=torch.float64)
    return Evaluation(scores, train_loss, val_loss)


def test_stop_reasons_follow_the_protocols_order():
    """Replica 0 diverges, 1 reaches the loss threshold and its patience at once (converged wins),
    2 runs out of patience, 3 goes on until the last epoch; the best epochs and stop epochs follow."""
    rules = bookkeeping(TrainConfig(epochs=3, patience=2, loss_threshold=0.1))
    state = LoopState.start(4, torch.device("cpu"))
    rules.update(state, 0, _evaluation([1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.1]))
    rules.update(state, 1, _evaluation([1.0, 1.0, 1.0, 1.0], [0.4, 0.4, 0.4, 0.2]))
    improved = rules.update(state, 2, _evaluation([math.nan, 0.05, 1.0, 1.0], [0.4, 0.4, 0.4, 0.3]))
    assert improved.tolist() == [False, False, False, True]
    assert state.reasons() == ["diverged", "converged", "patience", ""]
    assert state.active.tolist() == [False, False, False, True]
    rules.update(state, 3, _evaluation([1.0, 1.0, 1.0, 1.0], [0.9, 0.9, 0.9, 0.2]))
    assert state.reasons() == ["diverged", "converged", "patience", "max_epochs"]
    assert state.stop_epoch.tolist() == [2, 2, 2, 3]
    assert state.diverged_epoch.tolist() == [2, -1, -1, -1]
    assert state.best_epoch.tolist() == [0, 0, 0, 2]  # stopped replicas keep their selection


def test_state_dict_round_trip_and_layout():
    """state_dict is the checkpoint's loop part: the per-replica tensors under "loop" (every field
    but the reason codes, saved as names), the reasons, running flags, last pass loss, best state."""
    rules = bookkeeping(TrainConfig(epochs=5, patience=1))
    params = [torch.randn(3, 2, 2)]
    state = LoopState.start(3, torch.device("cpu"), params)
    rules.update(state, 0, _evaluation([1.0, math.inf, 1.0], [0.5, 0.5, 0.2]))
    rules.update(state, 1, _evaluation([1.0, 1.0, 1.0], [0.4, 0.4, 0.6]))
    state.last_pass_loss = torch.tensor([0.3, 0.2, 0.1], dtype=torch.float64)
    saved = state.state_dict()
    assert set(saved) == {"loop", "reason", "running", "last_pass_loss", "best_state"}
    assert set(saved["loop"]) == set(LoopState.tensor_keys()) - {"stop_reason"}
    assert saved["reason"] == ["patience", "diverged", ""] and saved["running"] == [False, False, True]

    other = LoopState.start(3, torch.device("cpu"), [torch.zeros(3, 2, 2)])
    other.load_state_dict(saved)
    for key in LoopState.tensor_keys():
        torch.testing.assert_close(getattr(other, key), getattr(state, key), rtol=0, atol=0, equal_nan=True)
    assert torch.equal(other.last_pass_loss, state.last_pass_loss)
    assert torch.equal(other.best_state[0], params[0])
    assert STOP_REASONS[0] == ""  # a running replica's code


def test_keep_best_copies_only_improved_replicas():
    params = [torch.arange(6.0).view(3, 2)]
    state = LoopState.start(3, torch.device("cpu"), params)
    new = [params[0] + 10]
    state.keep_best(new, torch.tensor([False, True, False]))
    assert state.best_state[0].tolist() == [[0, 1], [12, 13], [4, 5]]
