"""The LN authors' training setup as zoo options (gdasoulas/LipschitzNorm @ 25ddec3, models/deepgat.py,
train_deepgat_depth.py): biased input encoder of its own width, separate linear classifier, PyG's
attention init, ReduceLROnPlateau, test at the last epoch; and the suite variants that use them."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv

import zoo
from zoo.bench import load_suite
from zoo.bench.suite.load import parse_suite
from zoo.bench.suite.resolve import resolve_cell
from zoo.bench.suite.schema import SuiteError
from zoo.trainer.config import TrainConfig
from zoo.trainer.loop import train_replicas
from zoo.trainer.optim import StackedPlateau, make_lr_scheduler
from zoo.trainer.replicas import build_replicas
from tests.conftest import awkward_graph
from tests.trainer.test_train import _run, synthetic_task

CODE = dict(input_encoder="affine", input_encoder_dim=4, classifier="linear", bias=True, activation="elu")


def deepgat_parameters(idim: int, hdim: int, odim: int, heads: int, layers: int) -> int:
    """Parameters of the authors' DeepGAT: lin (idim -> hdim, bias), `layers` DeepGATConv
    (lin without bias, att_l / att_r of heads x hdim, bias of heads x hdim), fc1 (heads*hdim -> odim, bias)."""
    width = heads * hdim
    conv = lambda i: i * width + 2 * width + width  # noqa: E731
    return idim * hdim + hdim + conv(hdim) + (layers - 1) * conv(width) + width * odim + odim


# --------------------------------------------------------------------------- model options

def test_code_architecture_equals_a_pyg_deepgat():
    """Encoder -> L GATConv (heads concatenated, bias, ELU between, none after the last) -> linear
    classifier, as deepgat.py's forward in eval mode; built from PyG's GATConv with our weights."""
    torch.manual_seed(0)
    edge_index, n = awkward_graph()
    heads, channels, layers = 2, 3, 3
    model = zoo.build("gat", in_dim=5, out_dim=4, hidden_dim=heads * channels, heads=heads, num_layers=layers,
                      **{**CODE, "input_encoder_dim": 7}).double().eval()
    x = torch.randn(n, 5, dtype=torch.float64)
    convs = []
    for i, layer in enumerate(model.layers):
        conv = GATConv(7 if i == 0 else heads * channels, channels, heads=heads, concat=True, bias=True).double()
        with torch.no_grad():
            conv.lin.weight.copy_(layer.lin.weight)
            conv.att_src.copy_(layer.att_src.view(1, heads, channels))
            conv.att_dst.copy_(layer.att_dst.view(1, heads, channels))
            layer.bias.copy_(torch.randn_like(layer.bias))  # zero at init: make the bias count
            conv.bias.copy_(layer.bias)
        convs.append(conv.eval())
    h = model.input_encoder(x)
    for i, conv in enumerate(convs):
        h = conv(h, edge_index)
        if i < layers - 1:
            h = F.elu(h)
    expected = model.classifier(h)
    torch.testing.assert_close(model(edge_index, x), expected, rtol=0, atol=1e-10)
    assert model.input_encoder.bias is not None and model.classifier.bias is not None


def test_cora_code_model_has_the_authors_parameter_count():
    cells = [c for c in load_suite("lipschitz_table3", validate_models=False).cells
             if c.config["run"]["variant"] == "gat_lip_code" and c.config["model"]["kwargs"]["num_layers"] == 15]
    kwargs = cells[0].config["model"]["kwargs"]
    model = zoo.build("gat", in_dim=1433, out_dim=7, **kwargs)
    assert sum(p.numel() for p in model.parameters()) == deepgat_parameters(1433, 64, 7, 8, 15)
    assert len(model.layers) == 15  # num_layers counts the attention layers only, as DeepGAT(num_layers=15)


def test_classifier_default_is_unchanged():
    plain = zoo.build("gat", in_dim=5, out_dim=4, hidden_dim=6, num_layers=2)
    assert plain.classifier is None and plain.layers[-1].channels == 4 and not plain.layers[-1].concat


@pytest.mark.parametrize("kwargs,match", [
    ({"classifier": "linear", "out_heads": 1}, "out_heads"),
    ({"input_encoder_dim": 4}, "no input_encoder"),
    ({"classifier": "lineer"}, "linear"),
    ({"input_encoder": "afine"}, "affine"),
])
def test_bad_code_options_name_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        zoo.build("gat", in_dim=5, out_dim=4, hidden_dim=6, num_layers=2, **kwargs)


def test_classifier_breaks_the_conservation_law_so_balanced_inits_refuse():
    model = zoo.build("gat", in_dim=5, out_dim=4, hidden_dim=6, num_layers=2, classifier="linear")
    assert any("classifier" in r for r in model.conservation_law_violations())
    with pytest.raises(ValueError, match="classifier"):
        zoo.build("gat", in_dim=5, out_dim=4, hidden_dim=6, num_layers=2, classifier="linear", init="bal_o")


def test_xavier_pyg_draws_attention_with_pygs_fans():
    torch.manual_seed(0)
    kwargs = dict(in_dim=5, out_dim=4, hidden_dim=512, heads=8, num_layers=2, classifier="linear")
    pyg = zoo.build("gat", init="xavier_pyg", **kwargs)
    ours = zoo.build("gat", init="xavier", **kwargs)
    bound = (6 / (8 + 64)) ** 0.5  # PyG glorot on (1, 8, 64)
    for layer in pyg.layers:
        for att in (layer.att_src, layer.att_dst):
            assert bound * 0.95 < float(att.detach().abs().max()) <= bound
    assert float(ours.layers[0].att_src.detach().abs().max()) <= (6 / (1 + 512)) ** 0.5 < bound / 2
    with pytest.raises(ValueError, match="xavier"):
        zoo.build("gcn", in_dim=5, out_dim=4, num_layers=2, init="xavier_pyg")


# --------------------------------------------------------------------------- ReduceLROnPlateau

@pytest.mark.parametrize("options", [
    {},
    {"factor": 0.5, "patience": 2, "cooldown": 3, "min_lr": 1e-3},
    {"factor": 0.3, "patience": 1, "threshold": 0.05, "threshold_mode": "abs", "eps": 1e-3},
])
def test_stacked_plateau_matches_torch_per_replica(options):
    g = torch.Generator().manual_seed(1)
    epochs, replicas = 80, 3
    # plateaus, small improvements and NaNs: every branch of the torch scheduler is taken
    values = torch.cumsum(torch.randn(epochs, replicas, generator=g, dtype=torch.float64).clamp(min=-0.2), 0)
    values[::9] = values[::9] - 1.0
    values[17, 1] = float("nan")
    sched = StackedPlateau(replicas, 0.05, **options)
    refs = []
    for _ in range(replicas):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.05)
        refs.append((opt, torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **options)))
    active = torch.tensor([True, True, False])  # the third replica is stopped: its state must not move
    changed = False
    for e in range(epochs):
        sched.step(values[e], active)
        for r, (opt, ref) in enumerate(refs[:2]):
            ref.step(float(values[e, r]))
            assert float(sched.lr[r]) == opt.param_groups[0]["lr"], (e, r)
        changed |= float(sched.lr[0]) != 0.05
    assert changed and float(sched.lr[2]) == 0.05 and float(sched.best[2]) == float("inf")


def test_plateau_schedule_trains_like_torch():
    """train_replicas with lr_scheduler='plateau' and select='last' is a torch loop: Adam step, then
    ReduceLROnPlateau.step(validation loss of the new state), test accuracy of the final state."""
    task = synthetic_task()
    d = task.data
    epochs, lr, sched_opts = 40, 0.05, {"factor": 0.5, "patience": 2}

    def factory():
        return zoo.build("gat", in_dim=task.num_features, out_dim=task.num_classes, hidden_dim=8, num_layers=2,
                         classifier="linear", input_encoder="affine", bias=True)

    cfg = TrainConfig(optimizer="adam", lr=lr, weight_decay=5e-4, epochs=epochs, loss_threshold=0.0,
                      select="last", lr_scheduler="plateau", lr_scheduler_kwargs=sched_opts)
    reps, view = build_replicas(task, [factory], [3], torch.device("cpu"), torch.float64, cfg, stacked=True)
    result = train_replicas(task, reps, view, cfg, [3])[0]

    torch.manual_seed(3)
    ref = factory().double()
    x = d.x.double()
    opt = torch.optim.Adam(ref.parameters(), lr=lr, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **sched_opts)
    for _ in range(epochs):
        ref.train()
        opt.zero_grad()
        F.cross_entropy(ref(d.edge_index, x)[d.train_mask], d.y[d.train_mask]).backward()
        last_step_lr = opt.param_groups[0]["lr"]
        opt.step()
        ref.eval()
        with torch.no_grad():
            out = ref(d.edge_index, x)
        sched.step(float(F.cross_entropy(out[d.val_mask], d.y[d.val_mask])))
    assert opt.param_groups[0]["lr"] < lr  # the schedule did cut the learning rate
    # recorded with the run, beside how the epochs ran (eager on a CPU)
    assert result.extra == {"last_step_lr": last_step_lr, "cuda_graphs": "eager"}
    state = reps.state_of(0)
    for name, p in ref.named_parameters():
        torch.testing.assert_close(state[name], p.detach(), rtol=0, atol=1e-10)
    test_acc = float((out[d.test_mask].argmax(-1) == d.y[d.test_mask]).double().mean())
    assert result.best_epoch == epochs and result.metrics["test"] == test_acc


def test_code_setup_grouped_equals_sequential():
    """Stacked replicas, each with its own plateau schedule (the seeds cut their lr at different
    epochs), equal one-at-a-time runs at float64."""
    task = synthetic_task()
    cfg = TrainConfig(optimizer="adam", lr=0.05, epochs=30, loss_threshold=0.0, select="last",
                      lr_scheduler="plateau", lr_scheduler_kwargs={"factor": 0.5, "patience": 1})
    models = [("gat", 3, "xavier_pyg")] * 3
    options = dict(heads=2, classifier="linear", input_encoder="affine", input_encoder_dim=4, bias=True,
                   activation="elu")
    grouped, reps = _run(task, models, [0, 1, 2], cfg, stacked=True, **options)
    for r, seed in enumerate([0, 1, 2]):
        alone, one = _run(task, models[:1], [seed], cfg, stacked=False, **options)
        assert grouped[r].metrics == alone[0].metrics and grouped[r].best_epoch == alone[0].best_epoch == 30
        for name, p in one.state_of(0).items():
            torch.testing.assert_close(reps.state_of(r)[name], p, rtol=0, atol=1e-10)


def test_select_last_reports_the_final_state():
    task = synthetic_task()
    cfg = TrainConfig(optimizer="adam", lr=0.5, epochs=30, loss_threshold=0.0, select="last")
    factory = lambda: zoo.build("gcn", in_dim=task.num_features, out_dim=task.num_classes, num_layers=2)  # noqa: E731
    reps, view = build_replicas(task, [factory], [0], torch.device("cpu"), torch.float64, cfg, stacked=True)
    result = train_replicas(task, reps, view, cfg, [0])[0]
    assert result.best_epoch == 30 and result.stop_reason == "max_epochs"
    with torch.no_grad():
        out = reps.forward(*view.inputs(), train=False)[0]
    d = task.data
    assert result.metrics["val"] == float((out[d.val_mask].argmax(-1) == d.y[d.val_mask]).double().mean())


@pytest.mark.parametrize("kwargs,match", [
    ({"lr_scheduler": "plato"}, "plateau"),
    ({"lr_scheduler": "plateau", "lr_scheduler_kwargs": {"patiance": 3}}, "patience"),
    ({"lr_scheduler": "plateau", "lr_scheduler_kwargs": {"factor": 1.5}}, "factor"),
    ({"lr_scheduler_kwargs": {"factor": 0.5}}, "without an lr_scheduler"),
])
def test_bad_scheduler_settings_fail_with_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)
    assert make_lr_scheduler("none", 2, 0.1) is None


# --------------------------------------------------------------------------- the suite

def test_suite_code_variants_carry_the_authors_setup_and_text_variants_do_not():
    suite = load_suite("lipschitz_table3", validate_models=False)
    by_variant = {}
    for c in suite.cells:
        by_variant.setdefault(c.config["run"]["variant"], c.config)
    code, text = by_variant["gat_lip_code"], by_variant["gat_lip"]
    assert code["model"]["kwargs"] | {"num_layers": 0} == {
        "hidden_dim": 512, "heads": 8, "input_encoder": "affine", "input_encoder_dim": 64, "classifier": "linear",
        "bias": True, "activation": "elu", "dropout": 0.6, "attn_dropout": 0.3, "residual": "none", "num_layers": 0}
    assert code["model"]["init"] == "xavier_pyg" and code["model"]["norm_kwargs"] == {"variant": "authors_code"}
    assert code["train"]["lr_scheduler"] == "plateau" and code["train"]["select"] == "last"
    assert by_variant["gat_code"]["model"]["norm"] == "none"
    one_head = by_variant["gat_lip_code_1h"]
    assert one_head["model"]["kwargs"] == {**code["model"]["kwargs"], "heads": 1, "hidden_dim": 64,
                                           "num_layers": one_head["model"]["kwargs"]["num_layers"]}
    assert one_head["train"] == code["train"] and by_variant["gat_code_1h"]["model"]["norm"] == "none"
    # the text's variants are untouched: no new keys, so their cell ids (and stored records) stay valid
    assert "lr_scheduler" not in text["train"] and "classifier" not in text["model"]["kwargs"]
    assert text["model"]["init"] == "xavier" and text["train"]["select"] == "val_metric"


def test_scheduler_keys_enter_a_cell_only_where_set():
    base = {"dataset": "cora", "model": "gat"}
    assert "lr_scheduler" not in resolve_cell("t", base)["train"]
    cell = resolve_cell("t", {**base, "lr_scheduler": "plateau", "lr_scheduler_kwargs": {"patience": 5}})
    assert cell["train"]["lr_scheduler"] == "plateau" and cell["train"]["lr_scheduler_kwargs"] == {"patience": 5}
    with pytest.raises(SuiteError, match="patience"):
        resolve_cell("t", {**base, "lr_scheduler": "plateau", "lr_scheduler_kwargs": {"patiance": 5}})
    with pytest.raises(SuiteError, match="lr_scheduler"):
        parse_suite({"suite": {"name": "s"}, "defaults": {**base, "lr_scheduler": 3}, "grid": {"seed": [0]}})


def test_quick_code_variants_train():
    """The quick form stays quick: the code variants build and train on the synthetic task."""
    suite = load_suite("lipschitz_table3", quick=True)
    task = synthetic_task()
    for variant in ("gat_code", "gat_lip_code"):
        config = next(c.config for c in suite.cells if c.config["run"]["variant"] == variant)
        m = config["model"]
        factory = lambda: zoo.build(m["name"], in_dim=task.num_features, out_dim=task.num_classes,  # noqa: E731
                                    init=m["init"], norm=m["norm"], norm_kwargs=m["norm_kwargs"] or None,
                                    **{**m["kwargs"], "hidden_dim": 16, "input_encoder_dim": 4})
        cfg = TrainConfig(**{**config["train"], "betas": tuple(config["train"]["betas"]), "epochs": 2})
        reps, view = build_replicas(task, [factory], [0], torch.device("cpu"), torch.float32, cfg, stacked=True)
        result = train_replicas(task, reps, view, cfg, [0])[0]
        assert result.best_epoch == 2 and not result.diverged
