"""DeepGNN's and AttentionStack's options are checked by resolvers (zoo.nn.validation), each raising
one line that names the problem and the fix."""
from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
import torch
from torch import nn

import zoo
from zoo.nn import AttentionStack, DeepGNN
from zoo.nn import validation as v


def _raises(fn) -> list:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise)]


def test_deep_gnn_init_validates_only_through_resolvers():
    assert _raises(DeepGNN.__init__) == []
    assert len(inspect.getsource(DeepGNN.__init__).splitlines()) < 80


@pytest.mark.parametrize("kwargs, message", [
    ({"heads": 0}, "heads must be a positive integer, got 0"),
    ({"out_heads": 0}, "out_heads must be a positive integer, got 0"),
    ({"heads": -2, "out_heads": 1}, "heads must be a positive integer, got -2"),
])
def test_heads_below_one_are_answered_by_the_size_check(kwargs, message):
    """A later ``heads < 1 or out_heads < 1`` check in DeepGNN.__init__ could never fire (the size
    checks before it answer first); it is gone and these stay one line."""
    with pytest.raises(ValueError, match=message):
        zoo.build("gat", in_dim=4, out_dim=2, **kwargs)


@pytest.mark.parametrize("call, error, message", [
    (lambda: v.resolve_residual("dense"), ValueError, "unknown residual 'dense'.*Valid residuals: affine, identity, linear"),
    (lambda: v.resolve_hidden_heads("gat", "sum", 2, None, 8, True), ValueError, "unknown hidden_heads 'sum'"),
    (lambda: v.resolve_hidden_heads("gcn", "mean", 1, None, 8, False), ValueError,
     "gcn has no attention heads to average; drop hidden_heads='mean'"),
    (lambda: v.resolve_hidden_heads("gcn", "concat", 2, None, 8, False), ValueError, "gcn has no attention heads"),
    (lambda: v.resolve_hidden_heads("gat", "concat", 3, None, 8, True), ValueError,
     "hidden_dim=8 is not divisible by heads=3.*use e.g. hidden_dim=6"),
    (lambda: v.resolve_classifier("linear", 2), ValueError, "out_heads=2 .* drop out_heads"),
    (lambda: v.resolve_classifier("lineer", None), ValueError, "unknown classifier 'lineer'. Did you mean 'linear'"),
    (lambda: v.check_encoder_options("gat", None, 4, None, False), ValueError, "no input_encoder is set"),
    (lambda: v.check_encoder_options("gcn", None, None, "bond", False), ValueError,
     "gcn layers have no edge-feature term.*use gatv2 or gatdb"),
    (lambda: v.resolve_activation("relu6"), ValueError, "unknown activation 'relu6'"),
    (lambda: v.probability("dropout", 1.0), ValueError, r"dropout must be in \[0.0, 1.0\), got 1.0"),
    (lambda: v.check_stack_options(10, 4, 0.0, 0.0), ValueError,
     "hidden_dim=10 must be a positive multiple of heads=4"),
    (lambda: v.check_stack_options(8, 2, 0.0, 1.5), ValueError, r"attn_dropout must be in \[0.0, 1.0\), got 1.5"),
    (lambda: v.check_stack_options(8, 2, float("nan"), 0.0), ValueError, "dropout must be a number, got nan"),
])
def test_each_resolver_names_the_problem_and_the_fix_in_one_line(call, error, message):
    with pytest.raises(error, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_san_input_dropout_is_a_probability():
    with pytest.raises(ValueError, match=r"input_dropout must be in \[0.0, 1.0\), got 1.0"):
        zoo.build("san_pre_ln", in_dim=4, out_dim=2, input_dropout=1.0)
    assert zoo.build("san_pre_ln", in_dim=4, out_dim=2, input_dropout=0.25).input_dropout == 0.25


def test_resolvers_return_the_stored_form():
    assert v.resolve_residual("Linear") == "linear"
    assert v.resolve_hidden_heads("gat", "MEAN", 3, None, 8, True) == "mean"  # averaged heads need no split
    assert v.resolve_classifier(None, 2) == "none"
    act, homogeneous = v.resolve_activation("leaky-relu")
    assert isinstance(act, nn.LeakyReLU) and homogeneous
    assert v.resolve_activation(nn.Tanh())[1] is False
    lip = zoo.norms.resolve_norm("lipschitz")
    assert v.resolve_score_norm(lip, "gat", "additive") is lip
    assert v.resolve_score_norm(zoo.norms.resolve_norm("pairnorm"), "gcn", None) is None
    assert v.resolve_block_norms("pairnorm", None, "san", "dot_product")[1].name == "pairnorm"
    assert v.resolve_block_norms(None, None, "san", "dot_product") == (None, None)


def test_attention_stack_lives_in_zoo_nn():
    from zoo.models.san import SAN
    from zoo.models.transformer import GraphTransformer

    assert issubclass(SAN, AttentionStack) and issubclass(GraphTransformer, AttentionStack)
    assert AttentionStack.__module__ == "zoo.nn.attention_stack"
    from tests.conftest import REPO

    defined = [p.relative_to(REPO).as_posix() for p in (REPO / "zoo").rglob("*.py")
               if "class AttentionStack" in p.read_text()]
    assert defined == ["zoo/nn/attention_stack.py"]
    model = zoo.build("san_pre_ln", in_dim=4, out_dim=2, hidden_dim=8, heads=2, num_layers=2)
    out, records = model(torch.tensor([[0, 1, 2], [1, 2, 0]]), torch.randn(3, 4), return_attention=True)
    assert out.shape == (3, 2) and len(records) == 2
