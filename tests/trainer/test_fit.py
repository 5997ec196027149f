"""zoo.fit: the runner's cells and protocol from Python (same numbers as zoo bench), callbacks,
History, threads."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import zoo
from zoo.bench.run.driver import run_suite
from zoo.bench.run.options import RunOptions
from zoo.bench.suite.load import parse_suite
from zoo.bench.store import records

# Cornell (183 nodes) keeps the default tests fast; the Cora L = 10 comparison of the issue is slow.
SMALL = dict(num_layers=2, hidden_dim=8, dtype="float64", epochs=4)


def _bench(tmp_path, model, dataset, seeds, inits, optimizer, lr, **options):
    raw = {"suite": {"name": "fit_equivalence"},
           "defaults": {"model": model, "dataset": dataset, "optimizer": optimizer, "lr": lr, **options},
           "grid": {"seed": list(seeds), "init": list(inits)}}
    suite = parse_suite(raw, source="test")
    run_suite(suite, tmp_path / "bench", RunOptions(quiet=True))
    return {r["id"]: r for r in records.read_records(tmp_path / "bench" / records.RESULTS_FILE)}


def _same_as_bench(history, bench):
    assert sorted(c.id for c in history.cells) == sorted(bench)  # the same cells (ids hash the whole config)
    for r, cell in enumerate(history.cells):
        rec = bench[cell.id]
        assert history.final[r]["train"] == rec["metrics"]["train"]
        assert history.final[r]["val"] == rec["metrics"]["val"]
        assert history.final[r]["test"] == rec["metrics"]["test"]
        assert history.final[r]["val_loss"] == rec["val_loss"]
        assert history.best_epoch[r] == rec["epochs_to_best"]
        assert history.final[r]["stop_reason"] == rec["stop_reason"]


def test_fit_gives_the_numbers_of_zoo_bench(tmp_path):
    seeds, inits = [0, 1], ["xavier", "bal_o"]
    history = zoo.fit("gat", "cornell", seeds=seeds, inits=inits, optimizer="sgd", lr=0.1, **SMALL)
    bench = _bench(tmp_path, "gat", "cornell", seeds, inits, "sgd", 0.1, **SMALL)
    _same_as_bench(history, bench)
    assert history.metrics["val"].shape == (SMALL["epochs"] + 1, 4)
    assert history.labels == [f"seed={s} init={i}" for s in seeds for i in ("xavier", "balanced_orthogonal")]


def test_fit_applies_the_cells_training_plugins_as_bench_does(tmp_path):
    """A cell with ``rescale`` trains with dynamic rescaling in zoo.fit too (it recorded the key and
    trained without it), so fit and bench give its numbers from one adapter."""
    opts = dict(SMALL, rescale="weight_norms")
    history = zoo.fit("gatv2", "cornell", seeds=[0, 1], optimizer="sgd", lr=0.1, **opts)
    _same_as_bench(history, _bench(tmp_path, "gatv2", "cornell", [0, 1], ["xavier"], "sgd", 0.1, **opts))
    plain = zoo.fit("gatv2", "cornell", seeds=[0, 1], optimizer="sgd", lr=0.1, **SMALL)
    assert [f["val_loss"] for f in plain.final] != [f["val_loss"] for f in history.final]


def test_fit_refuses_prune_layers_which_it_would_not_measure():
    with pytest.raises(ValueError, match="prune_layers=\\[1\\] is a measurement of zoo bench"):
        zoo.fit("gat", "cornell", prune_layers=[1], **SMALL)


@pytest.mark.slow
def test_fit_on_cora_l10_matches_bench_float64(tmp_path):
    """The issue's check: Cora, L = 10, seeds 0-4 x {xavier, bal_o}, float64 (few epochs)."""
    seeds, inits = [0, 1, 2, 3, 4], ["xavier", "bal_o"]
    opts = dict(num_layers=10, dtype="float64", epochs=5)
    history = zoo.fit("gat", "cora", seeds=seeds, inits=inits, optimizer="sgd", lr=0.05, **opts)
    bench = _bench(tmp_path, "gat", "cora", seeds, inits, "sgd", 0.05, **opts)
    _same_as_bench(history, bench)


def test_history_models_are_the_selected_states(graph=None):
    history = zoo.fit("gat", "cornell", seeds=[0, 3], optimizer="adam", lr=0.01, **SMALL)
    from zoo.trainer.cells import TaskCache

    task = TaskCache().get(history.config["task"])
    d = task.data
    for r in range(history.size):
        model = history.model(r)  # best = the selected epoch
        with torch.no_grad():
            pred = model(d.edge_index, d.x.double()).argmax(-1)
        acc = float((pred[d.test_mask] == d.y[d.test_mask]).double().mean())
        assert acc == pytest.approx(history.final[r]["test"], abs=1e-12)
        assert model.build_config["init"] == "xavier"
    last = history.model("seed=3 init=xavier", which="last")
    assert not torch.equal(next(last.parameters()), next(history.model(1).parameters())) or \
        history.best_epoch[1] == SMALL["epochs"]
    with pytest.raises(ValueError, match="which must be"):
        history.model(0, which="middle")
    with pytest.raises(KeyError, match="no replica"):
        history.model("seed=9 init=xavier")


class _Spy:
    def __init__(self):
        self.epochs, self.threads, self.grads, self.ended = [], [], [], None

    def on_epoch_end(self, state):
        self.epochs.append(state.epoch)
        self.threads.append(torch.get_num_threads())
        self.grads.append(state.grads is not None)
        assert state.metrics["val"].shape == (state.size,)
        assert state.params[0].shape[0] == state.size
        m = state.replica(state.size - 1)
        assert dict(m.named_parameters()).keys() == set(state.names)

    def on_fit_end(self, state):
        self.ended = state.epoch


def test_callbacks_see_every_epoch_and_do_not_change_training():
    torch.set_num_threads(2)
    try:
        spy = _Spy()
        with_cb = zoo.fit("gatv2", "cornell", seeds=[0, 1], callbacks=[spy, zoo.diagnostics.LayerRecorder()],
                          **SMALL)
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(1)
    without = zoo.fit("gatv2", "cornell", seeds=[0, 1], **SMALL)
    assert spy.epochs == list(range(SMALL["epochs"] + 1)) and spy.ended == SMALL["epochs"]
    assert set(spy.threads) == {1}  # the runner's one thread on the CPU
    assert spy.grads == [True] * SMALL["epochs"] + [False]  # no gradient at the last state: no step follows
    assert with_cb.final == without.final
    np.testing.assert_array_equal(with_cb.metrics["train_loss"], without.metrics["train_loss"])


def test_conservation_recorder_as_callback_delta_vanishes():
    rec = zoo.diagnostics.ConservationRecorder(every=1)
    zoo.fit("gat", "cornell", seeds=[0], inits="bal_o", callbacks=[rec], **SMALL)
    assert [r["epoch"] for r in rec.history] == list(range(SMALL["epochs"]))
    assert max(max(r["max_abs_delta"]) for r in rec.history) < 1e-9  # Theorem 2.2 (ReLU GAT, float64)
    assert "val" in rec.history[0] and rec.history[0]["max_abs_c"][0] < 1e-5  # balanced at init (built in float32)


def test_fit_from_a_model_starts_from_its_weights():
    model = zoo.build("gat", in_dim=1703, out_dim=5, num_layers=2, hidden_dim=8, init="bal_o").double()
    before = [p.detach().clone() for p in model.parameters()]
    history = zoo.fit(model, "cornell", seeds=[0], **{**SMALL, "epochs": 0})
    assert history.best_epoch == [0]
    for a, b in zip(before, history.model(0).parameters()):
        assert torch.equal(a, b)
    for a, b in zip(before, model.parameters()):
        assert torch.equal(a, b)  # the given model is not changed
    with pytest.raises(ValueError, match="inits re-initialise"):
        zoo.fit(model, "cornell", inits=["xavier"], **SMALL)


def test_fit_bad_input_is_one_clear_line():
    with pytest.raises(ValueError, match="no option 'warp'|warp"):
        zoo.fit("gat", "cornell", warp=3, **SMALL)
    with pytest.raises(TypeError, match="on_epoch_end"):
        zoo.fit("gat", "cornell", callbacks=[object()], **SMALL)
    with pytest.raises(TypeError, match="seeds must be integers"):
        zoo.fit("gat", "cornell", seeds=["a"], **SMALL)
    with pytest.raises(ValueError, match="threads"):
        zoo.fit("gat", "cornell", threads=0, **SMALL)
    with pytest.raises(TypeError, match="dataset name"):
        zoo.fit("gat", 3, **SMALL)


def test_metrics_are_nan_after_a_replica_stops():
    history = zoo.fit("gat", "cornell", seeds=[0, 1], patience=1, optimizer="adam", lr=0.5,
                      **{**SMALL, "epochs": 30})
    for r in range(history.size):
        stopped = history.final[r]["epochs_run"]
        col = history.metrics["val"][:, r]
        assert np.isfinite(col[: stopped + 1]).all()
        assert all(math.isnan(v) for v in col[stopped + 1:])


def test_zoo_train_runs_the_cells_of_zoo_fit(tmp_path):
    """zoo train is zoo.fit's configuration run through the runner (records, resumption): same cells."""
    from zoo.cli import main

    out = tmp_path / "train"
    argv = ["train", "--model", "gat", "--dataset", "cornell", "--num-layers", "2", "--hidden-dim", "8", "--epochs", "4",
            "--dtype", "float64", "--optimizer", "sgd", "--lr", "0.1", "--inits", "xavier,bal_o", "--seeds", "0-1",
            "--quiet", "--out", str(out), "--save-weights", "best"]
    assert main(argv) == 0
    bench = {r["id"]: r for r in records.read_records(out / records.RESULTS_FILE)}
    history = zoo.fit("gat", "cornell", seeds=[0, 1], inits=["xavier", "bal_o"], optimizer="sgd", lr=0.1, **SMALL)
    _same_as_bench(history, bench)
    assert all((out / r["weights"]).is_file() for r in bench.values())
