"""Metrics and modes are declared once (zoo/bench/suite/measures.py) and the runner implements every mode."""
import pytest

from zoo.bench.suite.measures import METRICS, MODE_SPECS, MODES, metric_spec, mode_spec


def test_every_mode_declares_known_metrics():
    for spec in MODE_SPECS.values():
        assert spec.metrics and set(spec.metrics) <= set(METRICS)


def test_metric_properties_replace_name_tests():
    assert metric_spec("laplacian_energy").geometric and not metric_spec("laplacian_energy").percent
    assert metric_spec("pruned").per_layer and metric_spec("pruned").percent and not metric_spec("pruned").selected
    assert all(metric_spec(m).percent and metric_spec(m).selected for m in ("train", "val", "test"))
    assert not mode_spec("energy_at_init").trains
    rank = metric_spec("effective_rank")  # bounded in [1, width]: an arithmetic mean, no epoch selected
    assert not (rank.percent or rank.geometric or rank.per_layer or rank.selected)
    assert mode_spec("rank_at_init").metrics == ("effective_rank", "equal_rows_distance")
    assert metric_spec("equal_rows_distance").geometric  # falls by decades with depth: compared in log10
    assert not mode_spec("rank_at_init").trains and mode_spec("rank_at_init").one_graph
    assert not mode_spec("train").one_graph


def test_unknown_names_are_one_clear_error():
    with pytest.raises(ValueError, match="metric.*'tset'.*test"):
        metric_spec("tset")
    with pytest.raises(ValueError, match="mode"):
        mode_spec("prune")


def test_the_runner_implements_every_declared_mode():
    from zoo.bench.run.modes import MODES as IMPLEMENTED

    assert tuple(IMPLEMENTED) == MODES
    for name, mode in IMPLEMENTED.items():
        assert mode.spec is MODE_SPECS[name]
