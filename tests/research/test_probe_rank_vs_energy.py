"""research/probe_rank_vs_energy.py: one trace per layer, and the layers it prints."""
from __future__ import annotations

import pytest

from tests.conftest import research_script


@pytest.fixture(scope="module")
def probe():
    return research_script("probe_rank_vs_energy.py")


def test_layers_shown_are_powers_of_two_then_the_last(probe):
    assert probe.layers_shown(64) == [1, 2, 4, 8, 16, 32, 64]
    assert probe.layers_shown(5) == [1, 2, 4, 5]
    assert probe.layers_shown(1) == [1]


def test_one_rank_and_one_energy_per_layer(probe, capsys):
    out = probe.main(["gcn:xavier", "--layers", "3", "--hidden", "8"])
    t = out["gcn:xavier"]
    assert t["effective rank"].shape == (3,) and t["Dirichlet energy"].shape == (3,)
    assert bool((t["effective rank"] >= 1).all()) and bool((t["Dirichlet energy"] >= 0).all())
    assert "gcn:xavier: layer" in capsys.readouterr().out


def test_a_trained_model_is_measured_at_its_selected_state(probe, capsys):
    out = probe.main(["gcn:xavier", "--layers", "2", "--hidden", "8", "--epochs", "3"])
    assert out["gcn:xavier"]["effective rank"].shape == (2,)
    assert "after 3 epochs: test" in capsys.readouterr().out
