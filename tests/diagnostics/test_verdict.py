"""The diagnose verdict: computed from the numbers, naming layers and orders of magnitude."""
from __future__ import annotations

import numpy as np

from zoo.diagnostics.verdict import power_of_ten, replica_findings, verdict


def _data(grad_w, train_end=0.2, change=0.5, lap=None, R=1, T=3):
    L = len(grad_w)
    data = {"labels": [f"r{r}" for r in range(R)], "epochs": np.arange(T)}
    full = lambda v: np.full((T, R, L), v, dtype=float)  # noqa: E731
    data["grad_w"] = full(np.nan)
    data["grad_w"][:-1] = np.asarray(grad_w)
    data["grad_a"] = full(np.nan)
    data["change_w"] = full(change)
    data["change_a"] = full(np.nan)
    data["entropy"] = full(0.5)
    data["attention_change"] = full(0.1)
    data["laplacian"] = full(1.0) if lap is None else np.broadcast_to(np.asarray(lap, float), (T, R, L)).copy()
    data["dirichlet"] = full(1.0)
    data["c"] = np.ones((T, R, L - 1))
    data["delta"] = np.full((T, R, L - 1), 1e-12)
    data["train"] = np.full((T, R), 0.15)
    data["best_epoch"] = [2] * R
    data["final"] = [{"train": train_end, "test": 0.3}] * R
    return data


def test_vanishing_early_layers_are_named_with_their_order_of_magnitude():
    grads = [2e-7, 3e-7, 5e-7] + [0.05] * 6 + [0.1]
    text = verdict(_data(grads, train_end=0.16, change=0.001))
    assert "layers 1–3 receive 10⁻⁶ of layer 10's relative gradient: the model is untrainable at this init" in text
    assert "no layer moved by 1% of its norm" in text


def test_a_model_that_learns_is_said_to_train():
    text = verdict(_data([0.1] * 4, train_end=0.95))
    assert text.startswith("r0 trains: training metric 15.0 % → 95.0 %")
    assert "untrainable" not in text


def test_oversmoothing_and_conservation():
    data = _data([0.1] * 4, train_end=0.95, lap=[1.0, 1e-2, 1e-4, 1e-6])
    text = verdict(data)
    assert "Laplacian energy is 10⁻⁶ of the first's (oversmoothing)" in text
    assert "gradient identity holds" in text
    f = replica_findings(data, 0)
    assert f["energy_ratio"] == 1e-6 and f["status"] == "trains"


def test_power_of_ten():
    assert power_of_ten(1.3e-6) == "10⁻⁶"
    assert power_of_ten(0.5) == "10⁻¹"
    assert power_of_ten(0.0) == "0"


def test_an_untrained_model_is_not_said_to_stall():
    data = _data([0.1] * 4, train_end=0.15, change=0.0, T=1)
    text = verdict(data)
    assert text.startswith("r0 (not trained: epochs = 0): training metric 15.0 %")
    assert "stalls" not in text and "in 0 epochs" not in text and "moved by less" not in text


def test_one_line_per_replica():
    text = verdict(_data([0.1] * 4, train_end=0.95, R=3))
    lines = text.splitlines()
    assert len(lines) == 4 and [line.split()[0] for line in lines[:3]] == ["r0", "r1", "r2"]
    assert lines[-1].startswith("Best: ")


def test_uniform_weights_of_a_model_without_attention_are_not_called_attention():
    """A GCN's fixed neighbour weights have high entropy; the verdict speaks of attention only where the
    model learns attention parameters."""
    data = _data([0.1] * 4, train_end=0.95)
    data["entropy"][:] = 0.999
    assert "attention" not in verdict(data)  # grad_a is all NaN: no attention parameters
    data["grad_a"][:] = 0.1
    assert "attention stays uniform" in verdict(data)
