"""The model protocol and the options that belong to the layers that use them.

Every registered family is built with every option any family takes, one at a time, at a value that
is not that family's default.  An option the family does not declare must be refused at build time
with one line naming the families that take it; an option it declares must change the model (its
parameters, or its outputs on the same weights) or be refused for that value.  Nothing is silently
ignored: the old ``negative_slope`` of gcn / gin / ggnn / unimp, ``attn_dropout`` of gin / ggnn,
``bias`` of ggnn and ``edge_dim`` without an edge encoder were, and fail this test on the old code.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch

import zoo
from zoo.nn import AttentionStack, DeepGNN, GraphModel, LayerOptions
from zoo.registry import MODELS, constructor_options

BASE = {"in_dim": 4, "out_dim": 3, "hidden_dim": 8, "num_layers": 2}
#: non-default values to try, in order: the first that differs from the family's default is used
VALUES: Dict[str, List[Any]] = {
    "hidden_dim": [12], "num_layers": [3, 4], "heads": [2], "hidden_heads": ["mean"], "out_heads": [2],
    "activation": ["tanh", "relu"], "dropout": [0.5, 0.2], "bias": [True, False], "residual": ["linear", "none"],
    "norm": ["pairnorm"], "norm_kwargs": [{"scale": 2.0}], "self_loops": ["remove", "add"],
    "input_encoder": ["linear"], "input_encoder_dim": [6], "classifier": ["linear"],
    "edge_encoder": ["bond"], "edge_dim": [2], "recompute": [True], "layer_degree_onehot": [20],
    "attn_dropout": [0.5], "negative_slope": [0.5], "epsilon": [2.0], "share_weights": [False, True],
    "attention_bias": [True], "update_weight": ["separate"], "normalization": ["mean"], "eps": [0.5],
    "train_eps": [True], "gated": [False], "ffn_dim": [5], "pe_dim": [3], "scaled": [True, False],
    "placement": ["pre"], "input_dropout": [0.5], "nonlocal_norm": ["nd"],
    "dropout_position": ["output"], "classifier_input": ["activated"], "hops": [3], "reducers": [["sum"]],
    "in_dropout": [0.5], "global_dropout": [0.2], "global_layers": [1], "beta": [0.5], "qk_shared": [True],
    "pre_ln": [True], "post_bn": [False], "local_attn": [True], "global_attention": [False],
    "trans_num_layers": [1], "trans_num_heads": [2], "trans_dropout": [0.2], "gnn_dropout": [0.2],
    "graph_weight": [0.2], "aggregate": ["cat"],
}
#: the other options an option needs to act (the comparison model gets them too)
CONTEXT: Dict[str, Dict[str, Any]] = {
    "update_weight": {"share_weights": False}, "edge_dim": {"edge_encoder": "linear", "edge_dim": 5},
    "hidden_heads": {"heads": 2}, "dropout_position": {"dropout": 0.5}, "classifier_input": {"classifier": "linear"},
}
#: options given to every build of a family (no Laplacian eigenvectors of the toy graph needed)
FAMILY_BASE: Dict[str, Dict[str, Any]] = {"graph_transformer": {"pe_dim": 2}, "universal_transformer": {"pe_dim": 2}}


def _all_options() -> List[str]:
    return sorted({k for name in MODELS.names() for k in constructor_options(MODELS.get(name))} - {"in_dim", "out_dim"})


def _graph() -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 10, (2, 30), generator=g)
    return torch.cat([ei, ei.flip(0)], 1), torch.randn(10, 4, generator=g)


def _outputs(model: torch.nn.Module, edge_attr: Optional[torch.Tensor]) -> List[torch.Tensor]:
    ei, x = _graph()
    extra = {} if edge_attr is None else {"edge_attr": edge_attr}
    model.eval()
    with torch.no_grad():
        evaluated = model(ei, x, **extra)
    model.train()
    torch.manual_seed(1)
    with torch.no_grad():
        trained = model(ei, x, **extra)
    return [evaluated, trained]


def _same_random_weights(a: torch.nn.Module, b: torch.nn.Module, edge_attr: Optional[torch.Tensor]) -> None:
    """Both models get the same random nonzero parameters (biases and zero-started score biases too)."""
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for (_, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
            pa.copy_(torch.randn(pa.shape, generator=g, dtype=pa.dtype) * 0.5)
            pb.copy_(pa)


def _value(family: str, option: str) -> Any:
    cls = MODELS.get(family)
    default = cls.default_self_loops if option == "self_loops" else constructor_options(cls).get(option)
    return next(v for v in VALUES[option] if v != default)


def _build(family: str, **options: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo.build(family, **BASE, **FAMILY_BASE.get(family, {}), **options)


def _changes(family: str, option: str) -> str:
    """``"refused: ..."`` or ``"changed: ..."`` or ``"ignored"``: what ``option`` does to ``family``."""
    context = CONTEXT.get(option, {})
    value = _value(family, option)
    try:
        changed = _build(family, **{**context, option: value})
    except (TypeError, ValueError) as e:
        return f"refused: {e}"
    base = _build(family, **context)
    if option == "recompute":
        return "changed: recompute" if changed.recompute and not base.recompute else "ignored"
    if (option == "edge_encoder") != ("edge_encoder" in context):
        return "changed: parameters"  # one model reads edge features, the other does not
    edges = {"edge_encoder", "edge_dim"} & {option, *context}
    edge_attr = torch.randn(60, 5) if edges else None
    _outputs(base, edge_attr)  # materialise what a first call shapes (GATDB's xi)
    if option == "edge_dim":
        edge_attr = torch.randn(60, value)
    _outputs(changed, edge_attr)
    shapes = lambda m: [(k, tuple(v.shape)) for k, v in m.state_dict().items()]  # noqa: E731
    if shapes(changed) != shapes(base):
        return "changed: parameters"
    _same_random_weights(base, changed, edge_attr)
    if any(not torch.allclose(x, y) for x, y in zip(_outputs(base, edge_attr), _outputs(changed, edge_attr))):
        return "changed: outputs"
    return "ignored"


@pytest.mark.parametrize("family", MODELS.names())
def test_every_option_is_used_by_the_family_or_refused_naming_the_families_that_take_it(family):
    assert set(VALUES) >= set(_all_options()), f"give VALUES a value for {set(_all_options()) - set(VALUES)}"
    declared = constructor_options(MODELS.get(family))
    ignored = []
    for option in _all_options():
        outcome = _changes(family, option)
        if option not in declared:
            takers = MODELS.takers(option)
            assert outcome.startswith("refused") and "\n" not in outcome, (option, outcome)
            assert f"'{option}' (an option of {', '.join(takers)})" in outcome, (option, outcome)
        elif outcome == "ignored":
            ignored.append(option)
    assert ignored == [], f"{family} accepts and ignores {ignored}"


def test_the_check_finds_an_option_a_family_ignores(monkeypatch):
    """The test above can fail: a family that takes a layer option and never passes it on is caught."""
    from zoo.models.gcn import GCN, GCNLayer

    monkeypatch.setattr(GCN, "make_layer", lambda self, index, in_dim, channels, heads, concat, *, score_norm=None,
                        options: GCNLayer(in_dim, channels, "symmetric", self.bias))
    assert _changes("gcn", "normalization") == "ignored"
    assert _changes("gcn", "negative_slope").startswith("refused: model 'gcn' got unexpected option(s) "
                                                        "'negative_slope' (an option of gat, gatdb, gate, gatnb, gatv2)")


def test_both_base_classes_share_one_model_protocol():
    """DeepGNN and AttentionStack families read the same flags from one place."""
    assert issubclass(DeepGNN, GraphModel) and issubclass(AttentionStack, GraphModel)
    flags = ("family", "score_kind", "conservation_law_exception", "graph_tied", "attention_normalized",
             "supports_heads", "supports_edge_features", "default_self_loops", "check_inputs", "options_class")
    for base in (DeepGNN, AttentionStack):
        assert [f for f in flags if f in vars(base) and f != "conservation_law_exception"] == [], base
    for name in MODELS.names():
        model = _build(name)
        assert isinstance(model, GraphModel) and isinstance(model.options, LayerOptions)
        assert len(model.taps) == model.num_layers and model.skipped_layers == set()
        assert model.self_loops in ("add", "keep", "remove")


def test_layer_options_are_validated_once_where_they_are_declared():
    with pytest.raises(ValueError, match="attn_dropout must be in"):
        zoo.build("gat", **BASE, attn_dropout=1.5)
    with pytest.raises(ValueError, match="normalization must be one of"):
        zoo.build("gcn", **BASE, normalization="sum")
    with pytest.raises(TypeError, match="option train_eps must be true or false"):
        zoo.build("gin", **BASE, train_eps="yes")
    assert zoo.build("gatv2", **BASE, share_weights=False, update_weight="Separate").options.update_weight == "separate"


def test_a_suite_refuses_an_option_its_model_does_not_take_naming_the_models_that_do():
    """Suites too, when they load: a GIN cell given attn_dropout (e.g. from a grid over models) fails
    before any training, where it used to run identical rows."""
    from zoo.bench.suite.load import parse_suite
    from zoo.bench.suite.schema import SuiteError

    raw = {"suite": {"name": "t"}, "defaults": {"dataset": "twin", "model": "gin", "epochs": 1, "hidden_dim": 8},
           "grid": {"attn_dropout": [0.0, 0.5]}}
    with pytest.raises(SuiteError, match=r"model 'gin' has no option 'attn_dropout' \(an option of gat, gatdb, gate, "
                                         r"gatnb, gatv2, graph_transformer.*unimp"):
        parse_suite(raw)
    raw["defaults"]["model"] = "gat"
    assert len(parse_suite(raw).cells) == 2
