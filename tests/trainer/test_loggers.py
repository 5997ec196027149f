"""TensorBoard and MLflow loggers, read back with the packages' own readers; a missing package is one line."""
from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import pytest

import zoo
from zoo.trainer.loggers import KEYS, MLflowLogger, TensorBoardLogger, replica_name

# Under `pytest -n 2 --dist loadgroup` one worker imports mlflow and tensorboard and fits the module's model.
pytestmark = pytest.mark.xdist_group("loggers")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    root = tmp_path_factory.mktemp("loggers")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    tb, ml = TensorBoardLogger(root / "tb"), MLflowLogger(tracking_uri=uri, experiment="loggers", params={"note": "t"})
    history = zoo.fit("gat", "cornell", inits=["xavier", "bal_o"], seeds=[0], num_layers=2, hidden_dim=8, epochs=3,
                      keep_models=False, callbacks=[tb, ml])
    return history, root / "tb", uri, ml.run_id


def _same(a: float, b: float, rel: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=rel, abs=1e-12)


def test_replica_names_are_valid_in_both_tools():
    assert replica_name("seed=0 init=balanced_orthogonal") == "seed_0_init_balanced_orthogonal"
    assert replica_name("a/b c") == "a_b_c"


def test_tensorboard_event_files_hold_every_replicas_scalars(fitted):
    history, log_dir, _, _ = fitted
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir))
    events.Reload()
    names = [replica_name(label) for label in history.labels]
    assert sorted(events.Tags()["scalars"]) == sorted(f"{k}/{n}" for k in KEYS for n in names)
    for r, name in enumerate(names):
        for key in ("val", "train_loss"):
            scalars = events.Scalars(f"{key}/{name}")
            assert [s.step for s in scalars] == list(history.epochs)
            for s, e in zip(scalars, history.epochs):  # event files hold float32
                assert _same(s.value, history.metrics[key][e, r], rel=1e-6)


def test_mlflow_run_holds_metrics_and_params(fitted):
    history, _, uri, run_id = fitted
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and client.get_experiment(run.info.experiment_id).name == "loggers"
    params = run.data.params
    assert params["model.name"] == "gat" and params["model.num_layers"] == "2" and params["note"] == "t"
    assert params["replicas"] == ", ".join(history.labels)
    for r, label in enumerate(history.labels):
        for key in ("val", "train_loss"):
            points = sorted(client.get_metric_history(run_id, f"{key}/{replica_name(label)}"), key=lambda m: m.step)
            assert [m.step for m in points] == list(history.epochs)
            for m, e in zip(points, history.epochs):
                assert _same(m.value, history.metrics[key][e, r], rel=1e-12)


@pytest.mark.parametrize("logger, blocked, extra", [(TensorBoardLogger, "tensorboard", "tensorboard"),
                                                    (MLflowLogger, "mlflow", "mlflow")])
def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch, tmp_path, logger, blocked, extra):
    for name in list(sys.modules):
        if name == blocked or name.startswith(blocked + ".") or name.startswith("torch.utils.tensorboard"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # import of it fails as if not installed
    with pytest.raises(ImportError) as info:
        logger(tmp_path) if logger is TensorBoardLogger else logger()
    message = str(info.value)
    assert "\n" not in message and f"pip install 'gat-zoo[{extra}]'" in message


def test_a_second_fit_with_the_same_mlflow_logger_is_a_second_run(tmp_path):
    import torch

    state = SimpleNamespace(epoch=0, labels=["seed=0 init=xavier"], base=torch.nn.Linear(2, 2),
                            metrics={k: torch.tensor([0.5], dtype=torch.float64) for k in KEYS})
    logger = MLflowLogger(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = []
    for _ in range(2):
        logger.on_epoch_end(state)
        logger.on_fit_end(state)
        runs.append(logger.run_id)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert runs[0] != runs[1] and all(client.get_run(r).info.status == "FINISHED" for r in runs)
    assert client.get_run(runs[1]).data.metrics == {f"{k}/seed_0_init_xavier": 0.5 for k in KEYS}
