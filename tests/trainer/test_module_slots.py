"""The stacked forward puts each replica's tensors in the base module's own slots for the call
(:class:`zoo.trainer.replicas.ModuleSlots`): the same outputs, bit for bit, as ``torch.func.functional_call``
(stacked under vmap and one replica at a time), the module's own tensors back after every call, and
``functional_call`` kept for a module with tied weights."""
from __future__ import annotations

from typing import List

import pytest
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

import zoo
from zoo.trainer.replicas import ModuleSlots, Replicas


def _graph(n: int = 12, f: int = 7) -> tuple:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(0, n, (40,), generator=g)
    dst = torch.randint(0, n, (40,), generator=g)
    return torch.stack([src, dst]), torch.randn(n, f, generator=g)


def _models(name: str, **kwargs) -> List[nn.Module]:
    out = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        out.append(zoo.build(name, in_dim=7, out_dim=3, num_layers=2, hidden_dim=8, **kwargs))
    return out


class _Reference:
    """vmap(functional_call) over stacked tensors (the loop's call before the slots); the stacked
    buffers carry a norm's running statistics from call to call, as the group's do."""

    def __init__(self, models: List[nn.Module]) -> None:
        self.base = models[0]
        self.params, self.buffers = stack_module_state(models)

    def __call__(self, args: tuple, train: bool) -> torch.Tensor:
        self.base.train(train)
        call = vmap(lambda p, b: functional_call(self.base, (p, b), args), randomness="different")
        return call(self.params, self.buffers)


@pytest.mark.parametrize("name, kwargs", [("gatv2", {}), ("gat", {}), ("gcn", {}),
                                          ("gcn", {"norm": "batchnorm"})])
def test_stacked_forward_equals_functional_call(name: str, kwargs: dict) -> None:
    edge_index, x = _graph()
    models = _models(name, **kwargs)
    group = Replicas(models, stacked=True)
    assert group.slots is not None
    reference = _Reference(_models(name, **kwargs))
    for train in (False, True, False):
        want = reference((edge_index, x), train)
        got = group.forward(edge_index, x, train=train)
        assert torch.equal(got, want), (name, train)
    for n, b in group.buffers.items():  # the running statistics moved alike
        assert torch.equal(b, reference.buffers[n]), n


def test_one_at_a_time_path_equals_the_models() -> None:
    edge_index, x = _graph()
    models = _models("gatv2")
    group = Replicas(models, stacked=False)
    out = group.forward(edge_index, x, train=False)
    for r, m in enumerate(_models("gatv2")):
        assert torch.equal(out[r], m.eval()(edge_index, x))


def test_own_tensors_are_back_after_the_call_and_after_an_error() -> None:
    edge_index, x = _graph()
    group = Replicas(_models("gatv2"), stacked=True)
    own = {n: p for n, p in group.base.named_parameters()}
    group.forward(edge_index, x, train=True)
    assert all(p is own[n] for n, p in group.base.named_parameters())
    with pytest.raises(Exception):
        group.forward(edge_index, x[:, :3], train=True)  # wrong width: the model raises inside the call
    assert all(p is own[n] for n, p in group.base.named_parameters())


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)
        self.b.weight = self.a.weight  # one tensor, two names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


def test_tied_weights_keep_functional_call() -> None:
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(_Tied())
    group = Replicas(models, stacked=True)
    assert group.slots is None  # setting one name must set both: functional_call does
    x = torch.randn(3, 4)
    out = group.forward(x, train=False)
    for r, m in enumerate(models):  # a batched product against a plain one: close, not bitwise
        torch.testing.assert_close(out[r], m(x))


def test_train_mode_follows_each_call_and_outside_changes() -> None:
    edge_index, x = _graph()
    group = Replicas(_models("gatv2", dropout=0.5), stacked=True)
    group.forward(edge_index, x, train=True)
    assert group.base.training
    group.forward(edge_index, x, train=False)
    assert not any(m.training for m in group.base.modules())
    group.base.train()  # someone else's change is seen
    group.forward(edge_index, x, train=False)
    assert not any(m.training for m in group.base.modules())


def test_slots_of_a_module_in_order() -> None:
    models = _models("gcn", norm="batchnorm")
    params, buffers = stack_module_state(models)
    slots = ModuleSlots.of(models[0], list(params), list(buffers))
    assert slots is not None
    names = [*params, *buffers]
    for name, (module, attr, is_param) in zip(names, slots.places):
        owner, _, last = name.rpartition(".")
        assert module is models[0].get_submodule(owner) and attr == last
        assert is_param == (name in params)
