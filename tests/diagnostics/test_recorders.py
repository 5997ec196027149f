"""LayerRecorder / EnergyRecorder as zoo.fit callbacks: per replica, the numbers of that replica alone."""
from __future__ import annotations


import numpy as np
import pytest
import torch

import zoo
from zoo.trainer.cells import TaskCache
from zoo.diagnostics import EnergyRecorder, LayerRecorder, energy_trace, relative_grad_norms

SMALL = dict(num_layers=3, hidden_dim=8, dtype="float64", epochs=3)


def test_layer_recorder_reads_each_replica_of_a_stacked_fit():
    rec, energy = LayerRecorder(every=1), EnergyRecorder(every=3)
    history = zoo.fit("gat", "cornell", seeds=[0, 1], inits=["xavier", "bal_o"], callbacks=[rec, energy], **SMALL)
    a = rec.arrays()
    assert a["grad_w"].shape == (4, 4, 3) and a["c"].shape == (4, 4, 2)
    assert np.isnan(a["grad_w"][-1]).all() and np.isfinite(a["grad_w"][:-1]).all()  # no gradient at the last state
    assert (a["change_w"][0] == 0).all() and (a["attention_change"][0] == 0).all()
    assert ((0 < a["entropy"]) & (a["entropy"] <= 1 + 1e-12)).all()
    d = TaskCache().get(history.config["task"]).data
    for r in range(history.size):
        last = history.model(r, which="last")
        trace = energy_trace(last, d.edge_index, d.x.double()).numpy()
        np.testing.assert_allclose(a["laplacian"][-1, r], trace, rtol=1e-12)
        np.testing.assert_allclose(energy.history[-1]["trace"][r], trace, rtol=1e-12)
    np.testing.assert_array_equal(a["train"][:, 0], history.metrics["train"][:, 0])
    # balanced inits start with c = 0 (up to the float32 build)
    assert a["c"][0, 1].max() < 1e-5 and a["c"][0, 0].max() > 1e-2


def test_gradients_are_the_replicas_own():
    """Replica r's relative gradient norms equal those of its model alone, after one backward pass."""
    rec = LayerRecorder(every=1, energies=False, attention=False)
    history = zoo.fit("gatv2", "cornell", seeds=[0, 5], callbacks=[rec], **{**SMALL, "epochs": 1})
    task = TaskCache().get(history.config["task"])
    d = task.data
    for r in range(2):
        torch.manual_seed(history.seeds[r])
        model = zoo.build("gatv2", in_dim=d.num_features, out_dim=5, num_layers=3, hidden_dim=8).double()
        loss = torch.nn.functional.cross_entropy(model(d.edge_index, d.x.double())[d.train_mask], d.y[d.train_mask])
        loss.backward()
        expected = [n["features"] for n in relative_grad_norms(model)]
        np.testing.assert_allclose(rec.arrays()["grad_w"][0, r], expected, rtol=1e-9)


def test_recorders_refuse_bad_settings():
    with pytest.raises(ValueError, match="every"):
        LayerRecorder(every=0)
    with pytest.raises(ValueError, match="nothing recorded"):
        LayerRecorder().arrays()
    with pytest.raises(ValueError, match="energy"):
        EnergyRecorder(energy="kinetic")
