"""Initialisation plugins: registry, balanced inits (c = 0), looks-linear structure, Xav_Z, refusals."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

import zoo
from zoo.diagnostics import balance
from zoo.inits.balanced import ConservationLawError
from zoo.inits.orthogonal import looks_linear

EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 5, 0, 6, 7, 4], [1, 0, 2, 1, 3, 2, 4, 3, 4, 3, 7, 6, 6]])
N, IN, OUT = 8, 5, 3



@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny graphs: one thread avoids OpenMP spin-waiting on a busy CI runner (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


BALANCED = ["balanced_xavier", "balanced_orthogonal", "balanced_identity", "balanced_ll_identity"]

# Every variant for which the conservation law holds (heads 1 and 4, shared/unshared, residual...).
VARIANTS = {
    "gat_h1": ("gat", {}),
    "gat_h4": ("gat", dict(heads=4)),
    "gat_h4_bias": ("gat", dict(heads=4, bias=True)),
    "gatv2_shared_h1": ("gatv2", {}),
    "gatv2_shared_h4": ("gatv2", dict(heads=4)),
    "gatv2_unshared_h1": ("gatv2", dict(share_weights=False)),
    "gatv2_unshared_h4": ("gatv2", dict(share_weights=False, heads=4)),
    "gatv2_separate_update": ("gatv2", dict(share_weights=False, update_weight="separate", heads=2)),
    "gatv2_att_bias": ("gatv2", dict(attention_bias=True, bias=True, heads=2)),
    "gatv2_residual": ("gatv2", dict(residual="linear", heads=4)),
    "gat_residual": ("gat", dict(residual="linear")),
    "gcn": ("gcn", {}),
    "gcn_mean_residual": ("gcn", dict(normalization="mean", residual="linear")),
    "gatdb": ("gatdb", dict(heads=2)),
    "gatnb": ("gatnb", {}),
}


def make(name, init="xavier", init_kwargs=None, hidden_dim=8, num_layers=4, in_dim=IN, out_dim=OUT, **kw):
    return zoo.build(name, in_dim=in_dim, out_dim=out_dim, hidden_dim=hidden_dim, num_layers=num_layers,
                     init=init, init_kwargs=init_kwargs, **kw)


def assert_balanced(model, rel=1e-6):
    cs = balance(model)
    assert len(cs) == model.num_layers - 1
    for layer, c in enumerate(cs):
        groups = model.rescale_groups()[layer]
        scale = sum(float(p.detach().pow(2).sum()) for p in groups["incoming"]) / c.numel()
        assert scale > 0
        assert float(c.abs().max()) <= rel * scale, f"layer {layer}: max |c| = {float(c.abs().max()):.3g}"


# ---------------------------------------------------------------------------- registry
def test_names_aliases_and_normalisation():
    names = set(zoo.list_inits())
    assert {"xavier", "xavier_zero_att", "balanced_xavier", "ll_orthogonal", "balanced_orthogonal", "identity",
            "ll_identity", "balanced_identity", "balanced_ll_identity"} <= names
    from zoo.inits import INITS

    assert INITS.canonical("Bal-O") == "balanced_orthogonal"
    assert INITS.canonical("BAL_X") == "balanced_xavier"
    assert INITS.canonical("xav") == "xavier"
    assert INITS.canonical("Xav-Z") == "xavier_zero_att"
    with pytest.raises(ValueError, match="bal_o"):
        INITS.canonical("bal_oo")


def test_unknown_option_and_bad_values_are_explained():
    with pytest.raises(TypeError, match="beta"):
        make("gat", init="bal_o", init_kwargs={"betta": 2.0})
    with pytest.raises(ValueError, match="direction"):
        make("gat", init="bal_o", init_kwargs={"direction": "sideways"})
    with pytest.raises(ValueError, match="positive"):
        make("gat", init="bal_x", init_kwargs={"beta": -1.0})
    with pytest.raises(ValueError, match="neurons"):
        make("gat", init="bal_x", init_kwargs={"beta": torch.ones(3)})


def test_build_records_init():
    model = make("gat", init="Bal-O")
    assert model.build_config["init"] == "balanced_orthogonal"  # the registered name, as suites record it


# ---------------------------------------------------------------------------- balance: c = 0
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("init", BALANCED)
def test_balanced_init_gives_c_zero(variant, init):
    name, kw = VARIANTS[variant]
    model = make(name, init=init, **kw)
    assert_balanced(model)
    for layer in model.layers:  # attention and biases start at zero
        for p in layer.attention_params():
            assert torch.count_nonzero(p) == 0
    for skip in model.skips:
        assert torch.count_nonzero(skip.weight) == 0


def test_xavier_is_not_balanced():
    """The balance check can fail: standard Xavier leaves c far from zero (paper Fig. 2c)."""
    model = make("gatv2", hidden_dim=16, num_layers=4)
    assert max(float(c.abs().max()) for c in balance(model)) > 0.1


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("variant", ["gat_h4", "gatv2_unshared_h4", "gatv2_residual", "gcn"])
def test_both_directions_and_beta(direction, variant):
    name, kw = VARIANTS[variant]
    model = make(name, init="bal_x", init_kwargs={"beta": 3.0, "direction": direction}, **kw)
    assert_balanced(model)
    first, last = model.rescale_groups()[0], model.rescale_groups()[-1]
    if direction == "forward":  # ||theta_in^1[i]||^2 = beta
        norms = sum(p.detach().reshape(p.shape[0], -1).pow(2).sum(1) for p in first["incoming"])
    else:  # Remark 2.7: ||theta_out^L[:, i]||^2 = beta
        norms = sum(p.detach().pow(2).sum(0) for p in last["outgoing"])
    torch.testing.assert_close(norms, torch.full_like(norms, 3.0), rtol=1e-5, atol=0)


def test_beta_sampler_per_neuron():
    betas = 1.0 + torch.arange(8, dtype=torch.float64) / 8
    model = make("gatv2", init="bal_x", init_kwargs={"beta": lambda n: betas[:n]})
    assert_balanced(model)
    row_norms = model.layers[0].lin_src.weight.detach().double().pow(2).sum(1)
    torch.testing.assert_close(row_norms, betas, rtol=1e-5, atol=0)


def test_gatdb_xi_zeroed_once_materialised():
    model = make("gatdb", heads=2)
    x = torch.randn(N, IN)
    model(EDGES, x)  # materialises xi
    with torch.no_grad():
        for layer in model.layers:
            layer.xi.normal_()
    zoo.apply_init(model, "bal_o")
    for layer in model.layers:
        assert torch.count_nonzero(layer.xi) == 0
    assert_balanced(model)


def test_odd_widths_and_single_layer():
    model = make("gatv2", init="bal_o", hidden_dim=7, in_dim=9, out_dim=3, num_layers=3)
    assert_balanced(model)
    make("gatv2", init="bal_o", num_layers=1)  # no hidden neuron: nothing to balance, must not fail


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("kw, reason", [
    (dict(activation="elu"), "positively homogeneous"),
    (dict(residual="identity"), "identity skips"),
    (dict(norm="pairnorm"), "norm"),
])
def test_balanced_init_refuses_where_law_fails(kw, reason):
    if "norm" in kw and "pairnorm" not in zoo.list_norms():
        pytest.skip("no pairnorm plugin registered yet")
    with pytest.raises(ConservationLawError, match=reason):
        make("gatv2", init="bal_o", **kw)
    with pytest.warns(UserWarning, match=reason):
        model = make("gatv2", init="bal_o", init_kwargs={"strict": False}, **kw)
    assert_balanced(model)  # rescaled anyway: c = 0 at init (not conserved)


def test_family_exception_is_reported():
    class Transformerish(zoo.registry.MODELS.get("gatv2")):
        conservation_law_exception = "dot-product attention scores are not invariant under the rescaling"

    model = Transformerish(IN, OUT, 8, 3)
    with pytest.raises(ConservationLawError, match="dot-product"):
        zoo.apply_init(model, "bal_x")


@pytest.mark.parametrize("name", [n for n in zoo.list_models()
                                  if zoo.registry.MODELS.get(n).conservation_law_exception])
def test_families_without_the_law_refuse_balanced_inits(name):
    from tests.conftest import small_kwargs

    exception = zoo.registry.MODELS.get(name).conservation_law_exception
    with pytest.raises(ConservationLawError, match=re.escape(exception[:30])):
        zoo.build(name, init="bal_x", **small_kwargs(name))


UNBALANCED = ("xavier", "xav_z", "ll_orthogonal", "identity", "ll_identity")


@pytest.mark.parametrize("kw", [dict(activation="elu"), dict(residual="identity")], ids=["elu", "identity_skips"])
def test_unbalanced_inits_accept_any_model(kw):
    """Where the conservation law fails (the balanced inits refuse these models), the unbalanced inits
    build them without a warning and draw exactly the weights they draw where the law holds; each
    init draws its own (none falls back to another)."""
    drawn = {}
    for init in UNBALANCED:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.manual_seed(0)
            model = make("gatv2", init=init, **kw)
        torch.manual_seed(0)
        reference = dict(make("gatv2", init=init).named_parameters())
        params = dict(model.named_parameters())
        assert params.keys() == reference.keys()
        for name, p in params.items():
            torch.testing.assert_close(p, reference[name], rtol=0, atol=0, msg=f"{init}: {name}")
        drawn[init] = torch.cat([p.detach().flatten() for p in params.values()])
    for i, a in enumerate(UNBALANCED):
        for b in UNBALANCED[i + 1:]:
            assert not torch.equal(drawn[a], drawn[b]), f"{a} and {b} drew the same weights"


# ---------------------------------------------------------------------------- looks-linear structure
def _orthonormal(u):
    gram = u @ u.t() if u.shape[0] <= u.shape[1] else u.t() @ u
    torch.testing.assert_close(gram, torch.eye(gram.shape[0]), atol=1e-5, rtol=0)


def test_ll_orthogonal_structure():
    model = make("gatv2", init="ll_orthogonal", hidden_dim=16, in_dim=12, out_dim=8, num_layers=4)
    w1 = model.layers[0].lin_src.weight.detach()
    u1 = w1[:8]
    torch.testing.assert_close(w1[8:], -u1)
    _orthonormal(u1)
    w2 = model.layers[1].lin_src.weight.detach()
    u2 = w2[:8, :8]
    torch.testing.assert_close(w2[:8, 8:], -u2)
    torch.testing.assert_close(w2[8:, :8], -u2)
    torch.testing.assert_close(w2[8:, 8:], u2)
    _orthonormal(u2)
    wl = model.layers[-1].lin_src.weight.detach()
    torch.testing.assert_close(wl[:, 8:], -wl[:, :8])
    _orthonormal(wl[:, :8])
    # Squared norms: rows of W^1 are 1, rows and columns of hidden W^l are 2, columns of W^L are 1 here
    # (n_L = n_{L-1}/2: U^L has orthonormal columns).  §2's "||W^L[:, i]||^2 = 2" holds after balancing.
    torch.testing.assert_close(w1.pow(2).sum(1), torch.ones(16), atol=1e-5, rtol=0)
    torch.testing.assert_close(w2.pow(2).sum(0), torch.full((16,), 2.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(w2.pow(2).sum(1), torch.full((16,), 2.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(wl.pow(2).sum(0), torch.ones(16), atol=1e-5, rtol=0)
    assert all(torch.count_nonzero(p) == 0 for layer in model.layers for p in layer.attention_params())


def test_balanced_orthogonal_structure():
    """Bal_O keeps the mirrored blocks (only rescaled) and gives ||W^L[:, i]||^2 = 2 for any n_L."""
    model = make("gat", init="bal_o", hidden_dim=16, in_dim=12, out_dim=3, num_layers=4)
    w1 = model.layers[0].lin.weight.detach()
    torch.testing.assert_close(w1[8:], -w1[:8])
    torch.testing.assert_close(w1.pow(2).sum(1), torch.full((16,), 2.0), atol=1e-5, rtol=0)  # beta = 2
    _orthonormal(w1[:8] / 2 ** 0.5)
    w2 = model.layers[1].lin.weight.detach()  # square hidden layers are already balanced: untouched
    _orthonormal(w2[:8, :8])
    wl = model.layers[-1].lin.weight.detach()
    torch.testing.assert_close(wl[:, 8:], -wl[:, :8])
    torch.testing.assert_close(wl.pow(2).sum(0), torch.full((16,), 2.0), atol=1e-5, rtol=0)


def test_looks_linear_odd_sizes_crop():
    w = looks_linear(7, 5, "hidden")
    assert w.shape == (7, 5)
    torch.testing.assert_close(w[4:7, 3:5], w[:3, :2])  # mirrored blocks survive the crop
    torch.testing.assert_close(w[:4, 3:5], -w[:4, :2])
    assert looks_linear(5, 9, "first").shape == (5, 9)
    assert looks_linear(3, 7, "last").shape == (3, 7)
    with pytest.raises(ValueError, match="position"):
        looks_linear(4, 4, "middle")


def test_identity_variants():
    model = make("gcn", init="identity", hidden_dim=6, num_layers=4)
    torch.testing.assert_close(model.layers[1].lin.weight.detach(), torch.eye(6))
    model = make("gcn", init="ll_identity", hidden_dim=6, num_layers=4)
    eye = torch.eye(3)
    expected = torch.cat([torch.cat([eye, -eye], 1), torch.cat([-eye, eye], 1)], 0)
    torch.testing.assert_close(model.layers[2].lin.weight.detach(), expected)
    model = make("gcn", init="balanced_identity", hidden_dim=6, num_layers=4)
    torch.testing.assert_close(model.layers[1].lin.weight.detach(), torch.eye(6))  # identity is already balanced
    torch.testing.assert_close(model.layers[0].lin.weight.detach().pow(2).sum(1), torch.ones(6), atol=1e-6, rtol=0)


# ---------------------------------------------------------------------------- Xav_Z
@pytest.mark.parametrize("name", ["gat", "gatv2", "gatdb"])
def test_xavier_zero_att_gives_uniform_attention(name):
    model = make(name, init="xav_z", heads=2)
    x = torch.randn(N, IN)
    _, records = model(EDGES, x, return_attention=True)
    for rec in records:
        dst = rec.edge_index[1]
        deg = torch.zeros(N).index_add_(0, dst, torch.ones(dst.numel()))
        expected = (1.0 / deg[dst]).unsqueeze(1).expand_as(rec.alpha)
        torch.testing.assert_close(rec.alpha, expected)
    assert torch.count_nonzero(model.layers[0].outgoing_params()[0]) > 0


def test_xavier_attention_is_not_uniform():
    model = make("gatv2", heads=2)
    _, records = model(EDGES, torch.randn(N, IN), return_attention=True)
    dst = records[0].edge_index[1]
    deg = torch.zeros(N).index_add_(0, dst, torch.ones(dst.numel()))
    assert not torch.allclose(records[0].alpha, (1.0 / deg[dst]).unsqueeze(1).expand_as(records[0].alpha))


@pytest.mark.parametrize("init", ["xavier", "xav_z", "ll_orthogonal", "bal_x"])
def test_every_init_resets_gatdb_biases(init):
    model = make("gatnb")
    model(EDGES, torch.randn(N, IN))
    with torch.no_grad():
        for layer in model.layers:
            layer.xi.normal_()
    zoo.apply_init(model, init)
    assert all(torch.count_nonzero(layer.xi) == 0 for layer in model.layers)


def _layer_attributes() -> set:
    """The attribute names under which the families' layers hold their parameters (``att_src``, ``xi``,
    ``lin_dst``, ...), read from built models."""
    names = set()
    for name in zoo.list_models():
        extra = {"pe_dim": 0} if "transformer" in name else {}
        model = zoo.build(name, in_dim=4, out_dim=2, hidden_dim=4, num_layers=1, **extra)
        for layer in getattr(model, "layers", []):
            names |= {n.split(".")[0] for n, _ in layer.named_parameters()}
    return names - {"weight", "attention"}  # a matrix's own name; a transformer block's, also a symmetry group


def test_inits_see_a_layer_only_through_its_protocol():
    """No init (nor zoo.symmetry, which they read layers through) names a family's attribute: the old
    ``xavier`` read ``xi``, ``xavier_pyg`` ``att_src`` / ``att_dst`` and the balanced inits ``lin_dst``."""
    import ast

    from tests.conftest import REPO

    attributes = _layer_attributes()
    assert {"att_src", "lin_dst", "xi"} <= attributes  # the check can fail
    named = set()
    for path in [*(REPO / "zoo" / "inits").glob("*.py"), REPO / "zoo" / "symmetry.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                named.add((path.name, node.attr))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named.add((path.name, node.value))
    assert sorted(f"{f}: {n}" for f, n in named if n in attributes) == []


def test_xavier_pyg_draws_every_attention_vector_with_pygs_fans():
    """PyG's GATConv and GATv2Conv both store a (1, heads, channels) attention vector and draw it with
    glorot: xavier_pyg gives GATv2 the same (its attention_params), not only GAT v1."""
    for name in ("gat", "gatv2"):
        torch.manual_seed(0)
        model = zoo.build(name, in_dim=16, out_dim=4, hidden_dim=512, heads=8, num_layers=2, init="xavier_pyg")
        att = model.layers[0].attention_params()[0]
        bound = (6.0 / (8 + 64)) ** 0.5
        assert att.abs().max() <= bound and att.abs().max() > 0.9 * bound, name
    with pytest.raises(ValueError, match="redraws attention vectors.*GCN has none"):
        zoo.build("gcn", in_dim=4, out_dim=2, init="xavier_pyg")
