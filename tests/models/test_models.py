"""Tests every registered model gets for free (parametrised over the registry)."""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, stack_module_state, vmap

import zoo
from zoo.ops.segment import segment_sum
from zoo.trainer.replicas import Replicas
from tests.conftest import awkward_graph, small_kwargs

MODELS = zoo.list_models()


def dtype_of(name: str) -> torch.dtype:
    """float64, unless the family runs in float32 only (``float64_safe = False``: PyG's SGFormer)."""
    return torch.float64 if getattr(zoo.registry.MODELS.get(name), "float64_safe", True) else torch.float32


def tol(name: str) -> dict:
    return dict(rtol=1e-9, atol=1e-9) if dtype_of(name) == torch.float64 else dict(rtol=1e-5, atol=1e-5)


def make(name: str, **overrides) -> torch.nn.Module:
    kwargs = small_kwargs(name)
    kwargs.update(overrides)
    # Eigenvector signs are not permutation-canonical: test structure without positional encodings.
    if "pe_dim" in zoo.registry.constructor_options(zoo.registry.MODELS.get(name)):
        kwargs.setdefault("pe_dim", 0)
    torch.manual_seed(0)
    return zoo.build(name, **kwargs).to(dtype_of(name)).eval()


def inputs(name: str = "gat"):
    edge_index, n = awkward_graph()
    return edge_index, torch.randn(n, 6, dtype=dtype_of(name))


@pytest.mark.parametrize("name", MODELS)
def test_output_shape_and_finite(name):
    edge_index, x = inputs(name)
    out = make(name)(edge_index, x)
    assert out.shape == (x.size(0), 3)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", MODELS)
def test_single_node_graph(name):
    model = make(name)
    out = model(torch.empty(2, 0, dtype=torch.long), torch.randn(1, 6, dtype=dtype_of(name)))
    assert out.shape == (1, 3) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", MODELS)
def test_backward_reaches_every_parameter(name):
    edge_index, x = inputs(name)
    model = make(name).train()
    out = model(edge_index, x)
    (out * torch.randn_like(out)).sum().backward()
    params = dict(model.named_parameters())
    assert params, f"{name} has no parameters"
    missing = [n for n, p in params.items() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing, f"no (finite) gradient reaches {missing}"
    dead = [n for n, p in params.items() if not p.grad.abs().sum() > 0]
    assert not dead, f"gradient is identically zero for {dead}"


def permuted(edge_index, x, perm):
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel())
    return inverse[edge_index], x[perm]


@pytest.mark.parametrize("name", MODELS)
def test_node_permutation_equivariance(name):
    edge_index, x = inputs(name)
    model = make(name)
    out = model(edge_index, x)
    perm = torch.randperm(x.size(0), generator=torch.Generator().manual_seed(1))
    ei_p, x_p = permuted(edge_index, x, perm)
    if model.graph_tied:
        # Parameters tied to the first graph's edges cannot follow a relabelling: it must say so.
        with pytest.raises(ValueError, match="different graph"):
            model(ei_p, x_p)
        return
    torch.testing.assert_close(model(ei_p, x_p), out[perm], **tol(name))


@pytest.mark.parametrize("name", MODELS)
def test_edge_order_invariance(name):
    edge_index, x = inputs(name)
    model = make(name)
    out = model(edge_index, x)
    shuffled = edge_index[:, torch.randperm(edge_index.size(1), generator=torch.Generator().manual_seed(2))]
    torch.testing.assert_close(model(shuffled, x), out, **tol(name))


@pytest.mark.parametrize("name", MODELS)
def test_attention_records(name):
    edge_index, x = inputs(name)
    model = make(name)
    out, records = model(edge_index, x, return_attention=True)
    assert len(records) == model.num_layers
    for rec in records:
        assert rec.alpha.size(0) == rec.edge_index.size(1)
        assert torch.isfinite(rec.alpha).all()
        if model.attention_normalized:
            sums = segment_sum(rec.alpha, rec.edge_index[1], x.size(0))
            has_in = segment_sum(torch.ones(rec.edge_index.size(1), dtype=x.dtype), rec.edge_index[1], x.size(0)) > 0
            torch.testing.assert_close(sums[has_in], torch.ones_like(sums[has_in]))


@pytest.mark.parametrize("name", MODELS)
def test_vmap_over_stacked_replicas(name):
    """The runner trains replicas as one vmapped functional call: it must equal separate calls."""
    edge_index, x = inputs(name)
    replicas = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = make(name)
        m(edge_index, x)  # materialise lazy parameters (gatdb's xi)
        replicas.append(m)
    if not getattr(replicas[0], "vmap_safe", True):
        # declared not vmappable: the trainer's replicas take the one-at-a-time path, same numbers
        group = Replicas(replicas, stacked=True)
        assert not group.stacked
        out = group.forward(edge_index, x, train=False)
        for r, m in enumerate(replicas):
            torch.testing.assert_close(out[r], m(edge_index, x), **tol(name))
        return
    params, buffers = stack_module_state(replicas)

    def call(p, b):
        return functional_call(replicas[0], (p, b), (edge_index, x))

    stacked = vmap(call)(params, buffers)
    for r, m in enumerate(replicas):
        torch.testing.assert_close(stacked[r], m(edge_index, x), **tol(name))


@pytest.mark.parametrize("name", MODELS)
def test_model_card_and_docs_page(name):
    card = zoo.model_card(name)
    assert card.paper and card.equation and card.title
    assert card.docs, f"{name}'s card names no docs page"
    page = zoo.registry.Path(__file__).resolve().parents[2] / card.docs
    assert page.exists(), f"{name}: docs page {card.docs} is missing"
    assert name in page.read_text(), f"{card.docs} does not mention {name}"
