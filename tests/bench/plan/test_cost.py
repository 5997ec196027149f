"""The calibrated cost model (zoo.bench.plan.cost): features, the fit, the shipped coefficients,
the torch-free dataset table and ``zoo bench calibrate``."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from zoo.bench.plan import calibration, cost, cost_file

ROOT = Path(__file__).resolve().parents[3]
RECORDS = ROOT / "docs" / "reproduction" / "records"
TABLE = cost.load_dataset_table()


def config(dataset="cora", model="gatv2", layers=2, hidden=64, epochs=100, **kwargs):
    return {"model": {"name": model, "norm": "none", "kwargs": {"num_layers": layers, "hidden_dim": hidden, **kwargs}},
            "task": {"dataset": dataset, "options": {}}, "train": {"epochs": epochs, "batch_size": 0},
            "run": {"dtype": "float32"}}


def test_features_follow_the_configuration():
    base = cost.features(config(), 1, TABLE)
    deeper = cost.features(config(layers=10), 1, TABLE)
    assert deeper.edge_elements > 4 * base.edge_elements and deeper.layers_per_replica == 5 * base.layers_per_replica
    bigger = cost.features(config("pubmed"), 1, TABLE)
    assert bigger.edge_elements > 5 * base.edge_elements
    assert base.dropout_elements == 0 and cost.features(config(dropout=0.5), 1, TABLE).dropout_elements > 0
    # a dropped-out bag-of-words input is multiplied densely: far more multiply-adds
    assert cost.features(config(dropout=0.5), 1, TABLE).dense_macs > 10 * base.dense_macs
    # replicas share the per-call overhead, not the work
    stacked = cost.features(config(), 10, TABLE)
    assert stacked.dense_macs == base.dense_macs and stacked.layers_per_replica < base.layers_per_replica
    # mini-batches of graphs: one call per batch
    twin = config("twin", layers=1)
    twin["task"]["options"] = {"k": 8, "num_train": 32, "num_val": 1, "num_test": 1}
    one = cost.features(twin, 1, TABLE)
    twin["train"]["batch_size"] = 1
    assert cost.features(twin, 1, TABLE).layers_per_replica > 20 * one.layers_per_replica


def test_an_unknown_dataset_still_gets_an_estimate():
    c = config("my_own_graph", model="gat")
    assert cost.features(c, 3, TABLE).edge_elements > 0
    assert cost_file.load_cost_model().group_seconds([c] * 3, 100, TABLE) > 0


def test_a_model_without_a_cost_on_its_card_is_refused_not_guessed():
    """A family's per-layer work is on its card (registry/*.toml); one without it gets no invented
    coefficients (the old table gave every unlisted family, GATE among them, the same default)."""
    with pytest.raises(cost.CostModelError, match=r"model 'my_layer' has no cost on its card .*registry/\*\.toml"):
        cost.features(config("cora", model="my_layer"), 3, TABLE)
    from zoo.bench.plan.shards import group_cost
    from zoo.bench.suite.schema import Cell

    assert group_cost([Cell("c", "g", config("cora", model="my_layer"))]) == 0.0  # job order only


def test_every_registered_model_states_its_cost_on_its_card():
    from zoo.registry import MODELS, catalogue

    assert [m for m in MODELS.names() if set(cost.COST_KEYS) - set(catalogue()[m].get("cost", {}))] == []
    assert cost.layer_work("gatv2.brody2022_cora").extra_weights_in == {"share_weights": False,
                                                                        "update_weight": "separate"}


def synthetic_observations(coefficients):
    """Groups whose wall time is exactly the model's, with known coefficients."""
    obs = []
    configs = [config(d, m, layers=L, dropout=p) for d in ("cora", "citeseer", "texas_npz")
               for m in ("gat", "gatv2", "gcn") for L in (2, 5) for p in (0.0, 0.5)]
    for i, c in enumerate(configs):
        r = 1 + i % 4
        x = cost.features(c, r, TABLE).vector()
        wall = (100 + 1) * r * sum(k * v for k, v in zip(coefficients, x))
        obs.append(calibration.Observation("s", f"g{i}", c, r, 100, "train", wall))
    return obs


def test_fit_recovers_known_coefficients():
    truth = [2e-11, 4e-10, 1e-8, 1e-3]
    obs = synthetic_observations(truth)
    model = calibration.fit(obs, TABLE, per_suite=False)
    for term, value in zip(cost.TERMS, truth):
        assert model.coefficients[term] == pytest.approx(value, rel=1e-6)
    q = calibration.leave_one_out(obs, TABLE, per_suite=False)
    assert q.median_factor == pytest.approx(1.0, abs=1e-6) and q.r2_log == pytest.approx(1.0, abs=1e-6)


def test_fit_is_non_negative_and_suite_factors_are_relative():
    obs = synthetic_observations([2e-11, 4e-10, 1e-8, 1e-3])
    doubled = [calibration.Observation("slow", o.group, o.config, o.replicas, o.epochs, o.mode, 2 * o.wall_time_s)
               for o in obs[:12]] + obs[12:]
    model = calibration.fit(doubled, TABLE)
    assert all(v >= 0 for v in model.coefficients.values())
    assert model.suite_factors["slow"] > model.suite_factors["s"]


def _scaled(obs, suite, factor):
    return [calibration.Observation(suite, f"{suite}-{o.group}", o.config, o.replicas, o.epochs, o.mode,
                                    factor * o.wall_time_s) for o in obs]


def test_a_suite_without_records_gets_the_typical_suite_factor():
    """The unseen-suite factor is the median suite's factor, not 1: three suites whose groups take
    1x, 2x and 4x a common model's time, fitted together; a suite the fit has not seen is
    predicted like the middle one, and a suite's factor is shrunk toward it, not toward 1."""
    obs = synthetic_observations([2e-11, 4e-10, 1e-8, 1e-3])
    model = calibration.fit(_scaled(obs, "a", 1.0) + _scaled(obs, "b", 2.0) + _scaled(obs, "c", 4.0), TABLE)
    assert model.suite_factors["a"] < model.suite_factors["b"] < model.suite_factors["c"]
    assert model.unseen_suite_factor == pytest.approx(model.suite_factors["b"], rel=1e-9)
    assert model.unseen_suite_factor > 1.0
    c = obs[0].config
    base = model.group_seconds([c], 100, TABLE)  # no suite: the coefficients alone
    assert model.group_seconds([c], 100, TABLE, suite="never_run") == pytest.approx(base * model.unseen_suite_factor)
    assert model.group_seconds([c], 100, TABLE, suite="b") == pytest.approx(base * model.suite_factors["b"])
    # one suite of one group: its factor lies between its own ratio and the unseen-suite factor
    one = calibration.fit(_scaled(obs, "a", 1.0) + _scaled(obs, "b", 2.0) + _scaled(obs, "c", 4.0)
                          + _scaled(obs[:1], "d", 16.0), TABLE)
    assert one.unseen_suite_factor < one.suite_factors["d"] < 16.0 * one.suite_factors["a"]
    assert calibration.fit(obs, TABLE, per_suite=False).unseen_suite_factor == 1.0


def test_leave_one_suite_out_is_one_point_per_suite():
    """Each suite predicted by the other suites' fit: exact synthetic suites are predicted exactly."""
    obs = synthetic_observations([2e-11, 4e-10, 1e-8, 1e-3])
    q = calibration.leave_one_suite_out(_scaled(obs, "a", 1.0) + _scaled(obs[:6], "b", 1.0), TABLE)
    assert (q.groups, q.unit) == (2, "suites") and q.median_factor == pytest.approx(1.0, abs=1e-6)
    assert q.describe().startswith("2 suites: median error x1.00")


def test_the_shipped_model_lifts_a_suite_without_records():
    """quick has no records in the fit: its groups take the unseen-suite factor of the shipped cpu entry
    (the factor of 1 they had predicted the quick suite's groups at about half their time)."""
    model = cost_file.load_cost_model("cpu")
    assert "quick" not in model.suite_factors and model.unseen_suite_factor > 1.0
    c = config()
    assert model.group_seconds([c], 100, TABLE, suite="quick") == pytest.approx(
        model.unseen_suite_factor * model.group_seconds([c], 100, TABLE))


def test_observations_from_records_take_the_longest_replica():
    rec = {"status": "ok", "suite": "s", "group": "g", "group_wall_time_s": 10.0, "group_size": 2,
           "config": config(), "epochs_run": 40, "stop_reason": "patience"}
    obs = calibration.observations([rec, {**rec, "epochs_run": 90}, {**rec, "status": "failed"}])
    assert len(obs) == 1 and obs[0].epochs == 90 and obs[0].replicas == 2


def test_observations_keep_the_device_asked_for():
    """A model is fitted per device: GPU groups (lipschitz_table1 has two, ~40x faster) stay out of a CPU fit."""
    rec = {"status": "ok", "suite": "s", "group": "g", "group_wall_time_s": 10.0, "group_size": 1,
           "config": config(), "epochs_run": 40, "stop_reason": "max_epochs", "device": "cpu (x86_64, 2 cores)"}
    gpu = {**rec, "group": "h", "group_wall_time_s": 0.25, "device": "NVIDIA H200"}
    legacy = {k: v for k, v in rec.items() if k != "device"} | {"group": "k"}
    assert [o.group for o in calibration.observations([rec, gpu, legacy], device="cpu")] == ["g", "k"]
    assert [o.group for o in calibration.observations([rec, gpu, legacy], device="cuda:0")] == ["h"]
    assert len(calibration.observations([rec, gpu, legacy])) == 3


@pytest.mark.slow  # fits the cost model on every committed record (~8 s)
def test_shipped_model_beats_group_cost_on_the_records():
    """The committed records, leave-one-out: the model's median error is below that of the old
    ``plan.shards.group_cost`` (scaled) — the claim docs/benchmarks.md makes."""
    from zoo.bench.store.records import read_records

    rows = [r for folder in sorted(RECORDS.iterdir()) if folder.is_dir() for r in read_records(folder)]
    obs = [o for o in calibration.observations(rows, device="cpu") if o.mode == "train"]
    assert len(obs) >= 79
    model = calibration.leave_one_out(obs, TABLE)
    old = calibration.proportional_leave_one_out(obs, [calibration.size_cost(o.config, o.replicas, o.epochs) for o in obs])
    assert model.median_factor < 2.0 < old.median_factor and model.r2_log > 0.6 > 0.1 > old.r2_log


def test_shipped_file_has_a_cpu_and_a_cuda_fit():
    data = json.loads(cost_file.MODEL_FILE.read_text())
    assert set(data["devices"]["cpu"]["coefficients"]) == set(cost.TERMS)
    assert set(data["devices"]["cuda"]["coefficients"]) == set(cost.TERMS)
    m = cost_file.load_cost_model("cuda:0")
    assert m.device == "cuda" and "NVIDIA H200" in m.fitted_on
    assert m.coefficients != cost_file.load_cost_model("cpu").coefficients


def test_shipped_cuda_fit_reproduces_the_gpu_records():
    """The cuda entry is the fit of the committed GPU records (the H200's Cornell slice of balance_table2
    and its lipschitz_table1 groups): refitting gives it back, and each group's time is within 1.5x."""
    from zoo.bench.store.records import read_records

    rows = read_records(ROOT / "docs" / "reproduction" / "devices" / "h200-2026-11-28")
    rows += read_records(RECORDS / "lipschitz_table1")
    obs = calibration.observations(rows, device="cuda")
    assert len(obs) == 5 and not calibration.observations(rows[:45], device="cpu")
    refit = calibration.fit(obs, TABLE, per_suite=False)
    shipped = cost_file.load_cost_model("cuda")
    for term in cost.TERMS:
        assert refit.coefficients[term] == pytest.approx(shipped.coefficients[term], rel=1e-6, abs=1e-18)
    for o in obs:
        predicted = shipped.group_seconds([o.config] * o.replicas, o.epochs, TABLE, o.mode, o.suite)
        assert 1 / 1.5 < predicted / o.wall_time_s < 1.5, o.group


def test_a_mode_the_device_did_not_measure_takes_the_cpu_factor(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"devices": {
        "cpu": {"coefficients": {"dense_macs": 1.0}, "mode_factors": {"energy_at_init": 50.0}},
        "cuda": {"coefficients": {"dense_macs": 0.1}, "mode_factors": {}}}}))
    assert cost_file.load_cost_model("cuda", path).mode_factors == {"energy_at_init": 50.0}
    path.write_text(json.dumps({"devices": {
        "cpu": {"coefficients": {"dense_macs": 1.0}, "mode_factors": {"energy_at_init": 50.0}},
        "cuda": {"coefficients": {"dense_macs": 0.1}, "mode_factors": {"energy_at_init": 3.0}}}}))
    assert cost_file.load_cost_model("cuda", path).mode_factors == {"energy_at_init": 3.0}


def test_every_mode_that_does_not_train_is_priced_as_one_forward_pass():
    """A measured mode without a factor of its own (rank_at_init) costs as the measured groups the
    calibration fitted (energy_at_init), not as a training epoch with a factor of 1."""
    model = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {}, mode_factors={"energy_at_init": 50.0})
    cfg = config(layers=64, epochs=0)
    energy = model.group_seconds([cfg] * 10, 0, TABLE, "energy_at_init")
    assert model.group_seconds([cfg] * 10, 0, TABLE, "rank_at_init") == energy
    assert model.group_seconds([cfg] * 10, 0, TABLE, "train") < energy


def test_a_mode_that_trains_takes_its_suites_level():
    """train_attention / prune_layers groups are fitted as training groups of their suite (records do
    not name their mode), so they are priced with that suite's factor, not a factor of 1."""
    model = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0}, unseen_suite_factor=2.0)
    cfg = config(layers=2, epochs=10)
    train = model.group_seconds([cfg] * 5, 10, TABLE, "train", "s")
    assert model.group_seconds([cfg] * 5, 10, TABLE, "train_attention", "s") == train
    assert model.group_seconds([cfg] * 5, 10, TABLE, "prune_layers", "s") == train
    assert model.group_seconds([cfg] * 5, 10, TABLE, "train_attention", "other") == pytest.approx(train * 2.0 / 3.0)


def test_a_trained_group_takes_its_datasets_level_and_the_file_keeps_it(tmp_path):
    """A dataset's factor multiplies its trained groups' price beside the suite's (a dataset without one:
    1); ``zoo bench calibrate`` writes the factors and the loader reads them back."""
    model = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0}, dataset_factors={"pubmed": 2.0})
    cora, pubmed = config("cora", layers=2, epochs=10), config("pubmed", layers=2, epochs=10)
    plain = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0})
    assert model.group_seconds([pubmed] * 5, 10, TABLE, "train", "s") == pytest.approx(
        2.0 * plain.group_seconds([pubmed] * 5, 10, TABLE, "train", "s"))
    assert model.group_seconds([cora] * 5, 10, TABLE, "train", "s") == plain.group_seconds([cora] * 5, 10, TABLE,
                                                                                              "train", "s")
    path = tmp_path / "cost_model.json"
    cost_file.write_model([model], path, {})
    assert cost_file.load_cost_model("cpu", path).dataset_factors == {"pubmed": 2.0}


def test_a_trained_group_takes_its_shapes_level_and_the_file_keeps_it(tmp_path):
    """A shape's factor (suite, dataset, depth, family, norm) multiplies its trained groups' price beside the
    suite's and the dataset's; seeds, inits and heads share it, another depth does not; the file keeps it."""
    deep = config("cora", layers=40, epochs=10)
    key = cost.shape_key(deep, "s")
    assert key == "s|cora|40|gatv2|none" and cost.shape_key(config("cora", layers=40, heads=8), "s") == key
    model = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0}, dataset_factors={"cora": 2.0},
                           shape_factors={key: 1.5})
    plain = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0}, dataset_factors={"cora": 2.0})
    assert model.group_seconds([deep] * 5, 10, TABLE, "train", "s") == pytest.approx(
        1.5 * plain.group_seconds([deep] * 5, 10, TABLE, "train", "s"))
    shallow = config("cora", layers=5, epochs=10)
    assert model.group_seconds([shallow] * 5, 10, TABLE, "train", "s") == plain.group_seconds(
        [shallow] * 5, 10, TABLE, "train", "s")
    assert model.group_seconds([deep] * 5, 10, TABLE, "train", "other") == plain.group_seconds(
        [deep] * 5, 10, TABLE, "train", "other")
    path = tmp_path / "cost_model.json"
    cost_file.write_model([model], path, {})
    assert cost_file.load_cost_model("cpu", path).shape_factors == {key: 1.5}


def test_a_long_run_takes_its_depths_long_run_factor_and_the_file_keeps_it(tmp_path):
    """A run of at least LONG_RUN_EPOCHS epochs pays its suite's and depth's long-run factor on every epoch, a
    deeper stack without a factor of its own the deepest shallower one's, a shallower stack, a short run (a
    probe) and another suite none; the file keeps the factors."""
    model = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0}, long_run_factors={"s|32": 2.0})
    plain = cost.CostModel({"dense_macs": 1.0, "edge_elements": 1.0}, {"s": 3.0})
    long = cost.LONG_RUN_EPOCHS
    assert cost.depth_key(config("pubmed", layers=32), "s") == "s|32"
    for layers, epochs, suite, factor in ((32, long, "s", 2.0), (64, 5000, "s", 2.0), (2, 5000, "s", 1.0),
                                          (32, long - 1, "s", 1.0), (32, 5000, "other", 1.0)):
        c = config("cora", layers=layers)
        assert model.group_seconds([c] * 5, epochs, TABLE, "train", suite) == pytest.approx(
            factor * plain.group_seconds([c] * 5, epochs, TABLE, "train", suite))
    path = tmp_path / "cost_model.json"
    cost_file.write_model([model], path, {})
    assert cost_file.load_cost_model("cpu", path).long_run_factors == {"s|32": 2.0}


def test_the_lipschitz_norms_segment_reductions_are_counted_per_edge_and_head():
    """GAT-Lip's neighbourhood maximum is a scatter over the edges of every head (its time grew with the
    heads, 1.4 ms a head per layer and replica-epoch on Cora, where the four other counts barely move):
    its own count, per edge and head; none without the norm or without heads."""
    def lip(heads, norm="lipschitz"):
        c = config("cora", "gat", layers=4, heads=heads)
        c["model"]["norm"] = norm
        return cost.features(c, 5, TABLE)
    e_loops = TABLE["cora"]["edges"] + TABLE["cora"]["nodes"]
    assert lip(1).segment_elements == pytest.approx(4 * e_loops * 3.0)  # 4 layers, 3 passes, one head
    assert lip(8).segment_elements > 4 * lip(1).segment_elements
    assert lip(8, "none").segment_elements == 0 and lip(8, "pairnorm").segment_elements == 0
    assert cost.features(config("cora", "gcn"), 5, TABLE).segment_elements == 0


def test_a_stacked_gat_multiplies_its_dropped_bag_of_words_input_as_csr():
    """Stacked GAT / GATv2 replicas multiply a dropped sparse input's stored entries (their cards'
    ``dropped_input_csr``): the first layer's products are CSR multiply-adds (their own count) and the masks
    are drawn on the stored entries; one replica, a residual, or a family without the flag (GCN) still
    writes the dropped input densely; an input without dropout is CSR in every family."""
    def feats(model="gat", replicas=5, **kw):
        return cost.features(config("cora", model, layers=2, dropout=0.6, **kw), replicas, TABLE)
    cora = TABLE["cora"]
    nnz = cora["nodes"] * cora["features"] * cora["density"]
    stacked = feats()
    assert stacked.sparse_macs == pytest.approx(nnz * 64 * 4.0)  # 4 passes with dropout
    assert stacked.dense_macs < 0.01 * feats(replicas=1).dense_macs
    assert stacked.dropout_elements < 0.2 * feats(replicas=1).dropout_elements
    assert feats("gatv2").sparse_macs > 0
    for dense in (feats(replicas=1), feats(residual="identity"), feats("gcn")):
        assert dense.sparse_macs == 0
    plain = cost.features(config("cora", "gcn"), 1, TABLE)
    assert plain.sparse_macs == pytest.approx(nnz * 64 * 3.0)


def test_dataset_table_matches_the_registry():
    """Every real dataset's counts in the torch-free table are the registry's (no data loaded)."""
    from zoo.datasets import get_spec

    for key, size in TABLE.items():
        name = key.split(" ")[0]
        spec = get_spec(name)
        if spec.synthetic:
            continue
        for stat in ("nodes", "edges", "features", "classes"):
            want = spec.stats.get(stat)
            if isinstance(want, int) and stat != "edges":
                assert size[stat] == want, (key, stat)
        edges = {spec.stats.get("edges"), spec.stats.get("undirected_edges")}
        assert size["edges"] in edges or size.get("measured") is False or name == "ogbg_molhiv", key


@pytest.mark.slow  # resolves every shipped suite (~13 s)
def test_every_suite_dataset_is_in_the_table():
    from zoo.bench.suite.load import list_suites, load_suite

    missing = set()
    for name in list_suites():
        for c in load_suite(name, validate_models=False).cells:
            t = c.config["task"]
            if cost.dataset_size(t, TABLE) == cost.DEFAULT_SIZE:
                missing.add((t["dataset"], json.dumps(t["options"], sort_keys=True)))
    assert not missing, f"run benchmarks/dataset_sizes.py for {sorted(missing)}"


def test_plan_cost_is_torch_free():
    """Statically: the module imports neither torch nor any zoo module outside zoo.bench.plan but the
    model cards' torch-free reader and the modes' declarations (the run-time check of the whole layer is tests/test_layering.py's)."""
    import ast

    tree = ast.parse(Path(cost.__file__).read_text())
    named = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names] + \
        [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    # the cards and the modes' declarations (which modes train) are torch-free data
    allowed = ("zoo.bench.plan", "zoo.registry", "zoo._names", "zoo.bench.suite.measures")
    assert not [m for m in named if m.split(".")[0] == "torch" or (m.startswith("zoo") and
                                                                    not m.startswith(allowed))]


def test_calibrate_command(tmp_path):
    from zoo.cli import main

    out = tmp_path / "model.json"
    out.write_text(json.dumps({"devices": {"cuda": {"coefficients": {"dense_macs": 1.0}}}}))
    assert main(["bench", "calibrate", str(RECORDS / "balance_table2"), str(RECORDS / "lipschitz_table1"),
                 "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["devices"]["cpu"]["coefficients"]) == set(cost.TERMS)
    assert data["devices"]["cuda"] == {"coefficients": {"dense_macs": 1.0}}  # another device's entry is kept
    assert main(["bench", "calibrate", str(tmp_path / "nowhere"), "--out", str(out)]) == 2


def test_sparse_threshold_is_the_kernels():
    from zoo.ops.sparse_linear import SPARSE_MAX_DENSITY

    assert cost.SPARSE_MAX_DENSITY == SPARSE_MAX_DENSITY


def test_the_data_files_ship_with_the_package():
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "*.json" in cfg["options.package_data"]["zoo.bench.plan"]
    assert cost_file.MODEL_FILE.parent == cost.DATASET_TABLE.parent == Path(cost.__file__).parent


def test_averaged_hidden_heads_cost_heads_times_the_hidden_width():
    """hidden_heads = "mean": every hidden head is hidden_dim wide, so a layer's work grows with the heads."""
    concat = cost.features(config("cora", "gat", layers=4, heads=8), 1, TABLE)
    mean = cost.features(config("cora", "gat", layers=4, heads=8, hidden_heads="mean"), 1, TABLE)
    assert mean.dense_macs > 4 * concat.dense_macs and mean.edge_elements > 4 * concat.edge_elements


def test_fixed_aggregation_features_count_the_wider_first_layer():
    """A FAF MLP's first layer reads 1 + hops * |reducers| copies of the input: the card's
    ``input_copies`` gives the constructor's defaults, a preset or the cell overrides them."""
    import inspect

    from zoo.models.faf import FAFMLP

    card = cost.layer_work("faf_mlp").input_copies
    signature = inspect.signature(FAFMLP).parameters
    assert card["hops"] == signature["hops"].default
    assert list(card["reducers"]) == list(signature["reducers"].default)
    plain = cost.features(config("chameleon_filtered", model="faf_mlp", hidden=512), 1, TABLE)
    wide = cost.features(config("chameleon_filtered", model="faf_mlp", hidden=512, hops=5), 1, TABLE)
    preset = cost.features(config("chameleon_filtered", model="faf_mlp.rubio2026_chameleon", hidden=512), 1, TABLE)
    assert wide.dense_macs == preset.dense_macs > 1.9 * plain.dense_macs  # K = 5 (the preset's) against 2
    two = cost.features(config("chameleon_filtered", model="faf_mlp", hidden=512, reducers=["mean", "max"]), 1, TABLE)
    assert two.dense_macs > plain.dense_macs
