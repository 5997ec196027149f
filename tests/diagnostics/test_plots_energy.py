"""The energy-trace plot."""
from __future__ import annotations

import torch


def test_energy_trace_plot_labels_each_trace():
    import matplotlib

    matplotlib.use("Agg")
    from zoo.diagnostics.plots_energy import plot_energy_trace

    ax = plot_energy_trace(torch.tensor([[1.0, 0.1, 0.01], [1.0, 0.5, 0.2]]))  # two traces, one per row
    assert len(ax.get_lines()) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["trace 0", "trace 1"]
    ax = plot_energy_trace({3: [1.0, 0.5], 8: [1.0, 0.1]})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["3", "8"]
    ax = plot_energy_trace([1.0, 0.5, 0.2], first_layer=0)
    assert ax.get_legend() is None and ax.get_xlabel() == "layer k (first = 0)"
