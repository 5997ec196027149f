"""Score norms talk to attention layers through typed records of a score *kind*, never through a family.

Walk-through: the files a new attention family with LipschitzNorm touches.

* Before (a norm method per family): 6 — ``zoo/models/<family>.py``, the import line in
  ``zoo/models/__init__.py``, ``registry/<family>.toml``, ``docs/models/<family>.md``, a
  ``normalize_<family>`` method in ``zoo/norms/lipschitz.py`` reading the layer's attributes, and
  its signature in ``docs/norms.md``.
* After (a rule per score kind): 4 — the first four.  A family whose score is of an existing kind
  declares ``score_kind`` and passes a record of that kind; nothing under ``zoo/norms/`` changes,
  and the norms, inits and base classes name no family (checked below), so none of them can need
  a line for it.

The toy family below plays ``zoo/models/<family>.py`` (its ``register_model`` the import line);
the card and the page are data the docs tests check for the registered families.
"""
from __future__ import annotations

import ast
import re
from typing import List, Optional, Tuple

import pytest
import torch
from torch import Tensor, nn

import zoo
from tests.conftest import REPO
from zoo.graph import Graph, as_graph
from zoo.nn import DeepGNN
from zoo.norms.scores import (ADDITIVE, SCORE_KINDS, AdditiveScores, DotProductScores, MLPScores, ScoreRules,
                              score_rule)
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum
from zoo.registry import MODELS, register_model


class ToyAdditiveLayer(nn.Module):
    r"""A new attention family with an existing score kind, written with plain ops:

    .. math:: \alpha_{uv} = \operatorname{softmax}_u\big(\tanh(a_s^\top W h_u + a_t^\top W h_v)\big)

    (``tanh`` where GAT has LeakyReLU: not GAT, but the same *additive* score inside)."""

    def __init__(self, in_dim: int, channels: int, heads: int, concat: bool, score_norm=None) -> None:
        super().__init__()
        self.in_dim, self.channels, self.heads, self.concat = in_dim, channels, heads, concat
        self.lin = nn.Linear(in_dim, heads * channels, bias=False)
        self.att_src = nn.Parameter(torch.randn(heads, channels))
        self.att_dst = nn.Parameter(torch.randn(heads, channels))
        self.score_norm = score_norm

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        n = graph.num_nodes
        xw = self.lin(x).view(n, self.heads, self.channels)
        scores = (gather_rows((xw * self.att_src).sum(-1), graph.src)
                  + gather_rows((xw * self.att_dst).sum(-1), graph.dst))
        if self.score_norm is not None:
            scores = self.score_norm.normalize(AdditiveScores(graph, xw, self.att_src, self.att_dst, scores))
        alpha = segment_softmax(torch.tanh(scores), graph.dst, n)
        out = segment_sum(alpha.unsqueeze(-1) * gather_rows(xw, graph.src), graph.dst, n)
        return (out.reshape(n, -1) if self.concat else out.mean(1)), alpha

    def incoming_params(self) -> List[Tensor]:
        return [self.lin.weight]

    def attention_params(self) -> List[Tensor]:
        return [self.att_src, self.att_dst]

    def outgoing_params(self) -> List[Tensor]:
        return [self.lin.weight]


@pytest.fixture
def toy_family(monkeypatch):
    """Register the toy family for one test (the registry is restored afterwards)."""
    MODELS.names()  # every family registered first: the restored registry must hold them
    monkeypatch.setattr(MODELS, "_items", dict(MODELS._items))

    @register_model("toy_additive")
    class ToyAdditive(DeepGNN):
        family = "toy_additive"
        score_kind = ADDITIVE

        def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
            return ToyAdditiveLayer(in_dim, channels, heads, concat, score_norm)

    return ToyAdditive


def _graph(n: int = 25, m: int = 60) -> Tensor:
    ei = torch.randint(0, n, (2, m), generator=torch.Generator().manual_seed(3))
    return torch.cat([ei, ei.flip(0)], 1)


def _recorded_normalize(plugin) -> list:
    calls = []
    original = plugin.normalize

    def spy(record):
        out = original(record)
        calls.append((record, out.detach()))
        return out

    plugin.normalize = spy
    return calls


def test_a_new_family_with_an_existing_score_kind_gets_lipschitz_norm(toy_family):
    ei, x = _graph(), torch.randn(25, 5) * 1e5
    model = zoo.build("toy_additive", in_dim=5, out_dim=3, hidden_dim=8, heads=2, num_layers=3,
                      norm="lipschitz", norm_kwargs={"alpha": 0.5})
    assert type(model.layers[0].score_norm).__name__ == "LipschitzNorm"
    calls = _recorded_normalize(model.norm_plugin)
    assert torch.isfinite(model(ei, x)).all()
    assert len(calls) == 3
    g = as_graph(ei, x, "add")
    for record, got in calls:
        assert isinstance(record, AdditiveScores)
        assert got.abs().max() <= 0.5 * (1 + 1e-5) and got.abs().max() > 0.05  # |g| <= alpha, not trivially 0
        # Eq. 17 by hand: alpha s_uv / (||[a_s; a_t]|| sqrt(||x_v||^2 + max_{u'} ||x_u'||^2))
        sq = record.nodes.pow(2).sum(-1)
        best = torch.zeros_like(sq).scatter_reduce(0, g.dst[:, None].expand(-1, 2), sq[g.src], "amax",
                                                   include_self=False)
        a = torch.cat([record.att_src, record.att_dst], -1).norm(dim=-1)
        torch.testing.assert_close(got, 0.5 * record.scores / (a * (sq[g.dst] + best[g.dst]).sqrt()))


def test_the_rule_is_the_kinds_not_the_familys(toy_family):
    """The toy family and GAT share the additive rule: on the same record, the same numbers."""
    ei, x = _graph(), torch.randn(25, 5)
    toy = zoo.build("toy_additive", in_dim=5, out_dim=3, hidden_dim=8, heads=2, num_layers=1, norm="lipschitz")
    gat = zoo.build("gat", in_dim=5, out_dim=3, hidden_dim=8, heads=2, out_heads=2, num_layers=1, norm="lipschitz")
    gat.layers[0].load_state_dict(toy.layers[0].state_dict())
    toy_calls, gat_calls = _recorded_normalize(toy.norm_plugin), _recorded_normalize(gat.norm_plugin)
    toy(ei, x)
    gat(ei, x)
    torch.testing.assert_close(toy_calls[0][1], gat_calls[0][1])


class _DotOnlyNorm(ScoreRules):
    """A score norm whose one rule is for dot products: its kinds come from its rules."""

    name = "dot_only"

    @score_rule(DotProductScores)
    def _dot(self, scores) -> Tensor:
        return scores.scores


class _OneKindNorm:
    """A score norm with a rule for one kind (identity), recording the records it gets (the
    protocol written out, without :class:`ScoreRules`)."""

    def __init__(self, score_kind: str) -> None:
        self.name, self.score_kinds, self.seen = f"only_{score_kind}", frozenset({score_kind}), []

    def normalize(self, record) -> Tensor:
        self.seen.append(record)
        return record.raw() if isinstance(record, MLPScores) else record.scores


class _KindlessNorm:
    name = "kindless"

    def normalize(self, scores) -> Tensor:
        return scores.scores


class _BothNorm(_DotOnlyNorm):
    placement = "post"

    def make(self, dim: int) -> nn.Module:
        return nn.Identity()


@pytest.mark.parametrize("model, norm, error, message", [
    ("toy_additive", _DotOnlyNorm(), ValueError,
     r"norm 'dot_only' has no rule for additive scores \(toy_additive's kind; it has rules for dot_product\)"),
    ("gatv2", _DotOnlyNorm(), ValueError, "no rule for mlp scores"),
    ("san_pre_ln", _KindlessNorm(), TypeError, r"zoo.norms.ScoreNorm \(name, score_kinds, normalize\(scores\)\)"),
    ("gat", _BothNorm(), TypeError, "is both a FeatureNorm .* and a ScoreNorm"),
    ("gcn", _DotOnlyNorm(), ValueError, "gcn has no attention scores; use a feature norm"),
    ("gin", "lipschitz", ValueError, "gin has no attention scores"),
])
def test_a_norm_without_a_rule_for_the_kind_is_refused_at_build(toy_family, model, norm, error, message):
    with pytest.raises(error, match=message):
        zoo.build(model, in_dim=4, out_dim=2, hidden_dim=4, norm=norm)


def test_a_score_norm_of_a_declared_kind_reaches_every_family():
    """Every registered family with a score kind takes a norm that has a rule for that kind only."""
    ei, x = _graph(), torch.randn(25, 4)
    kinds = {}
    for name in zoo.list_models():
        cls = MODELS.get(name)
        kind = cls.score_kind
        if kind is None:
            continue
        assert kind in SCORE_KINDS, (name, kind)
        kinds[name] = kind

        plugin = _OneKindNorm(kind)
        extra = {"pe_dim": 0} if "transformer" in name else {}
        zoo.build(name, in_dim=4, out_dim=2, hidden_dim=4, num_layers=1, norm=plugin, **extra)(ei, x)
        assert plugin.seen and all(r.score_kind == kind for r in plugin.seen), name
    assert set(kinds.values()) == set(SCORE_KINDS)
    assert kinds["gat"] == "additive" and kinds["gatv2"] == "mlp" and kinds["unimp"] == "dot_product"


def test_lipschitz_refuses_a_record_of_no_kind():
    lip = zoo.norms.resolve_norm("lipschitz")
    with pytest.raises(TypeError, match="lipschitz has rules for .*additive.*got Tensor"):
        lip.normalize(torch.zeros(3, 1))


def test_a_score_norms_kinds_are_those_of_its_rules():
    """No list of kinds to keep in step with the rules: LipschitzNorm has a rule per kind, the toy norm one."""
    assert zoo.norms.resolve_norm("lipschitz").score_kinds == frozenset(SCORE_KINDS)
    assert _DotOnlyNorm.score_kinds == frozenset({"dot_product"})
    assert not isinstance(zoo.norms.resolve_norm("lipschitz"), zoo.norms.FeatureNorm)  # no make(), no placement


def _identifiers(path) -> List[str]:
    tree = ast.parse(path.read_text())
    found: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.append(node.name)
        elif isinstance(node, ast.Attribute):
            found.append(node.attr)
        elif isinstance(node, ast.Name):
            found.append(node.id)
    return found


def _names_a_family(identifier: str, families: List[str]) -> Optional[str]:
    tokens = "_" + identifier.lower().strip("_") + "_"
    return next((f for f in families if re.search(f"_{re.escape(f)}_", tokens)), None)


@pytest.mark.parametrize("folder", ["zoo/norms", "zoo/inits", "zoo/nn"])
def test_plugins_and_base_classes_name_no_model_family(folder):
    """The code (functions, classes, attributes, variables) of the norms, the inits and the base
    classes names score kinds and layer contracts, never a model family: a new family cannot need a
    line there.  The old ``normalize_gat`` / ``normalize_gatv2`` failed this.  (The fused kernels of
    ``zoo/ops`` are named after the score they compute; a family without one uses the plain ops.)"""
    families = sorted({*zoo.list_models(), *MODELS.aliases()})
    assert _names_a_family("normalize_gatv2", families) == "gatv2"  # the check can fail
    assert _names_a_family("att_src", families) is None
    offenders = sorted({f"{path.name}: {ident}" for path in (REPO / folder).rglob("*.py")
                        for ident in _identifiers(path) if _names_a_family(ident, families)})
    assert offenders == []
