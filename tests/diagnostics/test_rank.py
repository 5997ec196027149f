"""Rank diagnostics: numerical and effective rank of layer representations, the recorder, the page row."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import zoo
from zoo.diagnostics import RankRecorder, effective_rank, numerical_rank, rank_trace


def test_rank_one_features_have_rank_one():
    """A constructed collapse: every node a multiple of one vector."""
    torch.manual_seed(0)
    x = torch.randn(50, 1) @ torch.randn(1, 8)
    assert numerical_rank(x) == pytest.approx(1.0, abs=1e-9)
    assert effective_rank(x) == pytest.approx(1.0, abs=1e-6)


def test_full_rank_features():
    """Orthonormal columns: every singular value 1, so both ranks equal the width."""
    q, _ = torch.linalg.qr(torch.randn(40, 6, dtype=torch.float64))
    assert numerical_rank(q) == pytest.approx(6.0, rel=1e-9)
    assert effective_rank(q) == pytest.approx(6.0, rel=1e-9)
    x = torch.randn(40, 6, dtype=torch.float64)  # full rank, unequal singular values: strictly between
    assert 1.0 < numerical_rank(x) < 6.0 and 1.0 < effective_rank(x) < 6.0


def test_definitions_against_singular_values():
    x = torch.randn(30, 5, dtype=torch.float64) * torch.tensor([5.0, 2.0, 1.0, 0.5, 0.1], dtype=torch.float64)
    s = np.linalg.svd(x.numpy(), compute_uv=False)
    assert numerical_rank(x) == pytest.approx(float((s ** 2).sum() / s[0] ** 2), rel=1e-12)
    p = s / s.sum()
    assert effective_rank(x) == pytest.approx(math.exp(float(-(p * np.log(p)).sum())), rel=1e-12)


def test_zero_matrix_and_bad_shape():
    assert numerical_rank(torch.zeros(4, 3)) == 0.0 and effective_rank(torch.zeros(4, 3)) == 0.0
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        effective_rank(torch.zeros(4))


def test_rank_trace_reads_every_layer():
    torch.manual_seed(0)
    model = zoo.build("gat", in_dim=5, out_dim=3, num_layers=4, hidden_dim=8).double()
    ei = torch.randint(0, 20, (2, 60))
    x = torch.randn(20, 5, dtype=torch.float64)
    trace = rank_trace(model, ei, x, include_input=True)
    assert trace.shape == (5,) and trace[0] == pytest.approx(effective_rank(x))
    with pytest.raises(ValueError, match="rank"):
        rank_trace(model, ei, x, rank="stable")


def test_recorders_and_page_carry_the_ranks(tmp_path):
    rec = RankRecorder(every=2)
    zoo.fit("gat", "cornell", num_layers=3, hidden_dim=8, epochs=2, dtype="float64", callbacks=[rec])
    assert [h["epoch"] for h in rec.history] == [0, 2]
    assert np.array(rec.history[-1]["effective_rank"]).shape == (1, 3)
    page = zoo.diagnose("gat", "cornell", num_layers=3, hidden_dim=8, epochs=2)
    ranks = page.data["effective_rank"]
    assert ranks.shape == (3, 1, 3) and np.isfinite(ranks).all() and (ranks >= 1 - 1e-9).all()
    assert "effective rank of X^l" in page.html and "effective rank vs depth" in page.html
    with pytest.raises(ValueError, match="every"):
        RankRecorder(every=0)


def test_rank_recorder_reads_the_graph_of_a_task_with_edge_features() -> None:
    """The trainer passes ``(edge_index, x, False, edge_attr)`` where a task has edge features: the
    recorder reads the graph and x from it (as EnergyRecorder does), and skips epochs not due."""
    from types import SimpleNamespace

    import zoo
    from zoo.diagnostics.rank import RankRecorder

    torch.manual_seed(0)
    x, edge_index = torch.randn(6, 3), torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    model = zoo.build("gat", in_dim=3, out_dim=2, num_layers=2, hidden_dim=4).eval()
    rec = RankRecorder(every=2)
    for epoch in (0, 1):
        rec.on_epoch_end(SimpleNamespace(epoch=epoch, inputs=(edge_index, x, False, torch.randn(6, 2)), size=1,
                                         replica=lambda r: model))
    assert [e["epoch"] for e in rec.history] == [0] and len(rec.history[0]["effective_rank"][0]) == 2
    with pytest.raises(ValueError, match="RankRecorder needs a transductive task"):
        rec.on_epoch_end(SimpleNamespace(epoch=2, inputs=None))


def test_non_finite_features_have_rank_nan_and_the_diagnosis_goes_on():
    """A replica that diverges mid-diagnosis (here: SGD at lr 1e30) has NaN ranks from then on; the
    SVD used to raise on its features and took the whole page with it."""
    bad = torch.ones(4, 3)
    bad[1, 2] = float("inf")
    assert math.isnan(numerical_rank(bad)) and math.isnan(effective_rank(bad))
    page = zoo.diagnose("gat", "cornell", num_layers=3, hidden_dim=8, epochs=3, lr=1e30, optimizer="sgd")
    ranks = page.data["effective_rank"]
    assert np.isfinite(ranks[0]).all() and np.isnan(ranks[-1]).all()
    assert "effective rank of X^l" in page.html
