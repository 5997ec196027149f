"""Dynamic rescaling: a step leaves the network function unchanged (outputs equal to rounding,
gradients become the exact gradients at the new point), moves the balance toward its criterion,
and runs per replica as a zoo.fit callback."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.diagnostics import balance
from zoo.symmetry import layer_width, rescale_groups
from zoo.rescale import DynamicRescaling, _sums, rescale_step_

EDGES = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 5, 0, 6, 7, 4, 8, 9], [1, 0, 2, 1, 3, 2, 4, 3, 4, 3, 7, 6, 6, 9, 8]])
N, IN, OUT = 10, 5, 3
MODELS = [("gatv2", dict(share_weights=False, heads=2)), ("gat", dict(bias=True)), ("gate", {}),
          ("gate", dict(share_weights=True, residual="linear"))]


def random_model(name, **kw):
    torch.manual_seed(0)
    model = zoo.build(name, in_dim=IN, out_dim=OUT, hidden_dim=8, num_layers=4, **kw).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    return model


def loss_and_grads(model, x, y):
    model.zero_grad()
    out = model(EDGES, x)
    F.cross_entropy(out, y).backward()
    return out.detach(), {id(p): p.grad.detach().clone() for p in model.parameters()}


def own_stacked(model):
    """The model's own parameters and gradients as one-replica (1, ...) views: a step changes the model."""
    return {id(p): (p.data.unsqueeze(0), p.grad.unsqueeze(0)) for p in model.parameters()}


def imbalance(model, criterion):
    """Per hidden layer, max over neurons of |log(incoming / (outgoing + attention))| of the criterion's sums."""
    groups, stacked = rescale_groups(model), own_stacked(model)
    rel = criterion == "relative_gradients"
    out = []
    for l in range(len(groups) - 1):
        n = layer_width(model, l)
        num = _sums([stacked[id(p)] for p in groups[l]["incoming"]], n, "row", rel)
        den = (_sums([stacked[id(p)] for p in groups[l + 1]["outgoing"]], n, "column", rel)
               + _sums([stacked[id(p)] for p in groups[l]["attention"]], n, "row", rel))
        out.append(float((num / den).log().abs().max()))
    return out


@pytest.mark.parametrize("name, kw", MODELS)
@pytest.mark.parametrize("criterion", ["relative_gradients", "weight_norms"])
def test_a_step_keeps_the_function_and_makes_the_gradient_exact(name, kw, criterion):
    model = random_model(name, **kw)
    x, y = torch.randn(N, IN, dtype=torch.float64), torch.arange(N) % OUT
    before, _ = loss_and_grads(model, x, y)
    w0 = [p.detach().clone() for p in model.parameters()]
    lam = rescale_step_(model, own_stacked(model), criterion, iterations=3)
    moved = max(float((p.detach() - q).abs().max()) for p, q in zip(model.parameters(), w0))
    assert moved > 1e-2 and max(float((f - 1).abs().max()) for f in lam) > 1e-2  # the step did something
    transformed = {id(p): p.grad.detach().clone() for p in model.parameters()}
    after, fresh = loss_and_grads(model, x, y)
    torch.testing.assert_close(after, before, rtol=1e-11, atol=1e-11)
    for p in model.parameters():  # rescaled gradients = the gradients at the rescaled parameters
        torch.testing.assert_close(transformed[id(p)], fresh[id(p)], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("criterion", ["relative_gradients", "weight_norms"])
def test_a_step_moves_the_balance_toward_the_criterion(criterion):
    model = random_model("gate")
    x, y = torch.randn(N, IN, dtype=torch.float64), torch.arange(N) % OUT
    loss_and_grads(model, x, y)
    start, c0 = imbalance(model, criterion), max(float(c.abs().max()) for c in balance(model))
    rescale_step_(model, own_stacked(model), criterion, iterations=10, clip=(1e-3, 1e3))
    end = imbalance(model, criterion)
    assert all(e < 0.1 * s for s, e in zip(start, end)), (start, end)
    if criterion == "weight_norms":  # toward balance in the balance paper's sense: c -> 0
        assert max(float(c.abs().max()) for c in balance(model)) < 0.01 * c0


def test_clip_bounds_every_factor():
    model = random_model("gatv2")
    loss_and_grads(model, torch.randn(N, IN, dtype=torch.float64), torch.arange(N) % OUT)
    lam = rescale_step_(model, own_stacked(model), "weight_norms", iterations=1, clip=(0.9, 1.1))
    assert all(float(f.min()) >= 0.9 - 1e-12 and float(f.max()) <= 1.1 + 1e-12 for f in lam)


def test_callback_rescales_each_replica_without_changing_what_it_computes(mirror):
    """With a vanishing lr only the rescaling moves the parameters: every epoch's loss equals epoch 0's, per
    replica, and the final models are balanced (weight_norms drives c to 0)."""
    opts = dict(num_layers=4, hidden_dim=8, epochs=4, seeds=[0, 1], inits=["xavier"], dtype="float64",
                optimizer="sgd", lr=1e-300)  # a step far below float64 rounding: parameters stay put
    rescaling = DynamicRescaling(every=1, criterion="weight_norms", keep_factors=True)
    history = zoo.fit("gate", "cornell", callbacks=[rescaling], **opts)
    plain = zoo.fit("gate", "cornell", **opts)
    loss = history.metrics["train_loss"]
    torch.testing.assert_close(torch.as_tensor(loss), torch.as_tensor(plain.metrics["train_loss"]), rtol=1e-10, atol=0)
    assert sorted(rescaling.factors) == [0, 1, 2, 3, 4] and rescaling.factors[0][0].shape == (2, 8)
    for r in range(2):
        assert max(float(c.abs().max()) for c in balance(history.model(r, which="last"))) < 1e-3
        assert max(float(c.abs().max()) for c in balance(plain.model(r, which="last"))) > 1e-2


def test_bad_settings_and_models_without_the_symmetry_are_one_line(mirror):
    with pytest.raises(ValueError, match="criterion must be one of"):
        DynamicRescaling(criterion="norms")
    with pytest.raises(ValueError, match="every must be"):
        DynamicRescaling(every=0)
    with pytest.raises(ValueError, match="needs the rescaling symmetry"):
        zoo.fit("gatv2", "cornell", num_layers=3, hidden_dim=8, epochs=1, activation="elu",
                callbacks=[DynamicRescaling()])


def test_suites_name_the_same_criteria_and_other_cells_keep_their_ids():
    from zoo.bench.suite.load import load_suite, parse_suite
    from zoo.bench.suite.schema import RESCALE_CRITERIA, SuiteError
    from zoo.rescale import CRITERIA

    assert RESCALE_CRITERIA == CRITERIA
    suite = load_suite("rescale_heterophilous")
    runs = {c.config["run"].get("rescale") for c in suite.cells}
    assert runs == {None, "relative_gradients", "weight_norms"}
    assert all("rescale" not in c.config["run"] for c in suite.cells if c.config["run"].get("variant") == "none")
    raw = {"suite": {"name": "t", "title": "t"}, "defaults": {"dataset": "cora", "model": "gat", "rescale": "norms"},
           "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"}}
    with pytest.raises(SuiteError, match="rescale must be one of"):
        parse_suite(raw)


def test_a_suite_cell_with_rescale_trains_with_the_callback():
    from zoo.bench.suite.load import load_suite
    from zoo.trainer.cells import training_callbacks

    cells = {c.config["run"]["variant"]: c for c in load_suite("rescale_heterophilous").cells}
    assert training_callbacks([cells["none"].config]) == []
    (cb,) = training_callbacks([cells["weight_norms"].config])
    assert isinstance(cb, DynamicRescaling) and cb.criterion == "weight_norms" and cb.every == 10


def test_a_step_works_on_any_memory_layout():
    """The trainer may give the stacked parameters their gradients' layout (e.g. transposed)."""
    model = random_model("gatv2", share_weights=False)
    loss_and_grads(model, torch.randn(N, IN, dtype=torch.float64), torch.arange(N) % OUT)
    plain = {id(p): (p.detach().clone().unsqueeze(0), p.grad.clone().unsqueeze(0)) for p in model.parameters()}
    strided = {}
    for p in model.parameters():
        v, g = (t.clone().unsqueeze(0) for t in (p.detach(), p.grad))
        if v.dim() == 3:  # same values, transposed memory
            v, g = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (v, g))
        strided[id(p)] = (v, g)
    rescale_step_(model, plain, "relative_gradients", iterations=2)
    rescale_step_(model, strided, "relative_gradients", iterations=2)
    for k in plain:
        torch.testing.assert_close(strided[k][0], plain[k][0], rtol=1e-12, atol=0)
        torch.testing.assert_close(strided[k][1], plain[k][1], rtol=1e-12, atol=0)
