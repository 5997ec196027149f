"""The Oxford report's suites: Table 4's GAT-D degree features and Fig. 1's GATDB finding."""
from __future__ import annotations

from tests.papers.shipped import finding


def test_oxford_table4_gat_d_appends_degree_features(mirror, tmp_path, monkeypatch):
    """Report §5.2 (d): degrees are *added* to each node's features: Cora 1433 + 169 = 1602."""
    from zoo.trainer.cells import TaskCache
    from zoo.bench.suite.load import load_suite

    monkeypatch.setenv("ZOO_DATA_MIRROR", str(mirror))
    cells = [c for c in load_suite("oxford_table4", validate_models=False).cells
             if c.config["run"]["variant"] == "gat_d" and c.config["task"]["dataset"] == "cora"]
    assert cells
    task = TaskCache(root=tmp_path).get(cells[0].config["task"])
    max_in_degree = 168  # Cora (PyG Planetoid), in-degree without self-loops
    assert task.num_features == 1433 + max_in_degree + 1


def test_gatdb_beats_gat_quotes_a_result_not_only_an_expectation():
    quote = finding("oxford_fig1", "gatdb_beats_gat")["quote"]
    assert "Unsurprisingly, the dynamic attention of the flexible GATDB is able to perfectly fit" in quote
