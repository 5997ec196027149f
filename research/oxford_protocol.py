"""The Oxford report's benchmark-code protocol, shared by its probes: Adam 0.005, weight decay 5e-4, at
most 2000 epochs, early stopping with patience 100 on validation loss *or* accuracy, and the test
accuracy of the state with the lowest validation loss (the state the code restores)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def train_code_protocol(model: nn.Module, forward: Callable[[], Tensor], d, epochs: int = 2000) -> float:
    """Train ``model`` (logits from ``forward()``) on ``d``'s masks; test accuracy (%) as the code reports it."""
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best_loss, best_acc, best_test, wait = float("inf"), 0.0, 0.0, 0
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(forward()[d.train_mask], d.y[d.train_mask]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = forward()
        val_loss = float(F.cross_entropy(out[d.val_mask], d.y[d.val_mask]))
        pred = out.argmax(-1)
        val_acc = float((pred[d.val_mask] == d.y[d.val_mask]).double().mean())
        if val_loss < best_loss:  # the state restored at the end: the lowest validation loss
            best_test = float((pred[d.test_mask] == d.y[d.test_mask]).double().mean()) * 100
        improved = val_loss < best_loss or val_acc > best_acc
        best_loss, best_acc = min(best_loss, val_loss), max(best_acc, val_acc)
        wait = 0 if improved else wait + 1
        if wait >= 100:
            break
    return best_test
