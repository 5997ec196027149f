"""The custom-family contract of docs/usage.md: the documented family builds, balances and runs; a
layer that breaks the contract is refused with one line naming it."""
from __future__ import annotations

import re
import sys
import types

import pytest
import torch

import zoo
from tests.conftest import REPO
from zoo.inits.balanced import ConservationLawError
from zoo.registry import MODELS


@pytest.fixture
def family():
    text = (REPO / "docs" / "usage.md").read_text()
    start = text.index("### A model family of your own")
    code = re.findall(r"```python\n(.*?)```", text[start:text.index("## Adding a model", start)], re.S)
    module = types.ModuleType("usage_doc")  # a real module: the example's dataclass looks itself up there
    sys.modules["usage_doc"] = module
    try:
        exec(compile("\n".join(code), "docs/usage.md custom family", "exec", dont_inherit=True), module.__dict__)
        yield module.__dict__
    finally:
        MODELS._items.pop("mean_gnn", None)
        sys.modules.pop("usage_doc", None)


def test_the_documented_family_builds_balanced_and_runs(family):
    model = family["model"]
    from zoo.symmetry import conservation_violations

    assert conservation_violations(model) == []
    out = model(family["edge_index"], torch.randn(4, 8))
    assert out.shape == (4, 3) and torch.isfinite(out).all()


def test_a_layer_returning_only_its_output_is_refused(family):
    class NoAlpha(family["MeanLayer"]):
        def forward(self, graph, x):
            return super().forward(graph, x)[0]

    model = zoo.build("mean_gnn", in_dim=8, out_dim=3, num_layers=2)
    model.layers[0].__class__ = NoAlpha
    with pytest.raises(TypeError, match=r"NoAlpha.forward must return \(out, alpha\).*LayerProtocol.*got Tensor"):
        model(family["edge_index"], torch.randn(4, 8))


def test_a_layer_without_its_symmetry_refuses_balanced_inits(family):
    class Plain(torch.nn.Module):
        def __init__(self, in_dim, channels):
            super().__init__()
            self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, 1, True
            self.lin = torch.nn.Linear(in_dim, channels)

        def forward(self, graph, x):
            return self.lin(x), torch.ones(graph.edge_index.size(1), 1)

    family["MeanGNN"].make_layer = lambda self, index, in_dim, channels, heads, concat, **_: Plain(in_dim, channels)
    zoo.build("mean_gnn", in_dim=8, out_dim=3, num_layers=2, init="xavier")  # other inits work
    with pytest.raises(ConservationLawError, match=r"layer 0 \(Plain\) does not implement LayerProtocol's "
                                                   r"incoming_params, attention_params, outgoing_params"):
        zoo.build("mean_gnn", in_dim=8, out_dim=3, num_layers=2, init="bal_o", residual="none")
