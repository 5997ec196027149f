"""Registry, presets, build options and their error messages."""
from __future__ import annotations

import pytest
import torch

import zoo
from zoo._names import Registry, normalize_name


def test_list_models_and_wildcards():
    names = zoo.list_models()
    assert {"gcn", "gat", "gatv2", "gatdb", "gatnb"} <= set(names)
    assert set(zoo.list_models("gat*")) >= {"gat", "gatv2", "gatdb", "gatnb"}
    assert "gcn" not in zoo.list_models("gat*")
    assert zoo.list_models("GAT?2") == ["gatv2"]


def test_names_are_normalised():
    assert normalize_name("Bal-O") == normalize_name("bal o") == "bal_o"
    assert type(zoo.build("GATv2", in_dim=3, out_dim=2)).__name__ == "GATv2"


def test_preset_builds_and_user_kwargs_override_but_none_does_not():
    model = zoo.build("gat.velickovic2018_cora", in_dim=10, out_dim=7)
    assert (model.num_layers, model.heads, model.out_heads, model.hidden_dim) == (2, 8, 1, 64)
    assert model.dropout == 0.6 and model.options.attn_dropout == 0.6 and model.activation == "elu"
    assert model.layers[0].channels == 8  # 8 heads x 8 hidden
    model = zoo.build("gat.velickovic2018_cora", in_dim=10, out_dim=7, num_layers=4, dropout=None)
    assert model.num_layers == 4 and model.dropout == 0.6


def test_model_card():
    card = zoo.model_card("gat")
    assert "Veličković" in card.paper and "LeakyReLU" in card.equation
    assert card.defaults["negative_slope"] == 0.2 and card.defaults["bias"] is False
    assert "velickovic2018_cora" in card.presets
    assert "gat.velickovic2018_cora" in zoo.list_presets("gat.*")
    assert "gatv2" in str(zoo.model_card("gatv2"))


@pytest.mark.parametrize("preset", zoo.list_presets())
def test_every_preset_builds_runs_and_is_on_its_card(preset):
    """Registry-parametrised: each preset (the field baselines' gat/gcn.luo2024_*, faf_mlp.rubio2026_*
    included) builds with its values, gives finite logits on a small graph, and its family's card lists it."""
    family, tag = preset.split(".", 1)
    assert tag in zoo.model_card(family).presets
    torch.manual_seed(0)
    ring = torch.arange(12)
    edges = torch.cat([torch.stack([ring, (ring + 1) % 12]), torch.stack([(ring + 1) % 12, ring])], 1)
    out = zoo.build(preset, in_dim=5, out_dim=3).eval()(edges, torch.randn(12, 5))
    assert out.shape == (12, 3) and torch.isfinite(out).all()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: zoo.build("gatt", in_dim=1, out_dim=1), ValueError, r"unknown model 'gatt'\. Did you mean 'gat'.*Valid models: .*gatv2"),
        (lambda: zoo.build("gat.cora2018", in_dim=1, out_dim=1), ValueError, r"unknown preset 'gat.cora2018'.*gat.velickovic2018_cora"),
        (lambda: zoo.build("gat", in_dim=1, out_dim=1, hiden_dim=3), TypeError, r"'hiden_dim' \(did you mean 'hidden_dim'"),
        (lambda: zoo.build("gat"), TypeError, "needs in_dim and out_dim"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, hidden_dim=10, heads=4), ValueError, "not divisible by heads=4"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, activation="relu6"), ValueError, "unknown activation 'relu6'.*relu"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, residual="dense"), ValueError, "unknown residual 'dense'"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, num_layers=0), ValueError, "num_layers must be a positive integer, got 0"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, norm="groupnorm"), ValueError, "unknown norm 'groupnorm'"),
        (lambda: zoo.build("gat", in_dim=4, out_dim=2, init="bal-q"), ValueError, "unknown init 'bal-q'"),
        (lambda: zoo.build("gcn", in_dim=4, out_dim=2, heads=2), ValueError, "gcn has no attention heads"),
        (lambda: zoo.build("gatv2", in_dim=4, out_dim=2, update_weight="separate"), ValueError, "needs share_weights=False"),
        (lambda: zoo.build("gatv2", in_dim=4, out_dim=2, update_weight="target"), ValueError, "update_weight must be one of"),
    ],
)
def test_errors_name_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_registering_a_name_twice_raises():
    with pytest.raises(ValueError, match="'gat' is already registered"):
        zoo.register_model("gat")(type("Other", (), {}))
    reg = Registry("thing")
    reg.add("a-b", 1, aliases=("ab",))
    with pytest.raises(ValueError, match="already registered"):
        reg.add("AB", 2)
    assert reg.get("A B") == 1 and reg.get("ab") == 1


def test_gatdb_is_tied_to_its_graph():
    model = zoo.build("gatdb", in_dim=3, out_dim=2, hidden_dim=4)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    x = torch.randn(3, 3)
    model(edge_index, x)
    assert model.layers[0].xi.shape == (3 + 3, 1)  # 3 edges + 3 self-loops, 1 head
    assert torch.count_nonzero(model.layers[0].xi) == 0  # zero-initialised: plain GAT at init
    model(edge_index.clone(), x)  # the same graph in a new tensor is fine
    with pytest.raises(ValueError, match="tied|different graph"):
        model(torch.tensor([[0, 1], [1, 2]]), x)


def test_gatnb_attention_is_static_and_gatdb_is_not():
    """Report Theorem 3: with node biases, every query's top key is the same node."""
    n = 12
    full = torch.ones(n, n).nonzero().t()
    x = torch.randn(n, 5)
    for name, static in (("gatnb", True), ("gatdb", False)):
        torch.manual_seed(3)
        model = zoo.build(name, in_dim=5, out_dim=4, num_layers=1, self_loops="keep")
        model(full, x)
        with torch.no_grad():
            model.layers[0].xi.normal_(0, 3.0)
        _, records = model(full, x, return_attention=True)
        alpha = torch.zeros(n, n)
        ei = records[0].edge_index
        alpha[ei[1], ei[0]] = records[0].alpha[:, 0]
        top_keys = alpha.argmax(dim=1)
        assert (top_keys.unique().numel() == 1) == static, f"{name}: top keys {top_keys.tolist()}"


def test_registry_is_complete_when_read_before_the_families_are_imported():
    """``import zoo.registry`` alone (``zoo/__init__`` loads lazily) must still list every family:
    the registry imports its family modules at the first lookup.  A fresh process, since this one
    has imported them already."""
    import subprocess
    import sys

    code = ("import zoo.registry as r\n"
            "assert {'gat', 'gatv2', 'gcn', 'san_pre_ln'} <= set(r.MODELS.names()), r.MODELS.names()\n"
            "assert 'gatdb' in r.MODELS and len(r.MODELS) >= 13\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1500:]


def test_the_same_definition_registered_again_replaces_it_with_a_warning():
    reg = Registry("thing")

    def make():
        def plugin():
            return 1
        return plugin

    first, again = make(), make()  # one definition (same module and qualified name), as a re-run cell makes
    reg.add("p", first, aliases=("q",))
    with pytest.warns(UserWarning, match="'p' was registered already by the same definition"):
        reg.add("p", again, aliases=("q",))
    assert reg.get("q") is again
    with pytest.raises(ValueError, match="already registered"):
        reg.add("p", lambda: 2)  # another definition still may not shadow it


def test_a_notebook_model_and_init_can_be_registered_twice():
    from zoo.inits import INITS, register_init
    from zoo.registry import MODELS

    def cell():
        @zoo.register_model("test_rerun_model")
        class RerunModel(torch.nn.Module):
            pass

        @register_init("test_rerun_init")
        def rerun_init(model):
            pass
        return RerunModel, rerun_init

    try:
        cell()
        with pytest.warns(UserWarning, match="registered already"):
            model_cls, init_fn = cell()
        assert MODELS.get("test_rerun_model") is model_cls and INITS.get("test_rerun_init") is init_fn
    finally:
        MODELS._items.pop("test_rerun_model", None)
        INITS._items.pop("test_rerun_init", None)
