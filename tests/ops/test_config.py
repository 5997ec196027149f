"""The fused-kernel switch: env var at import, set_fused, the context manager and its restore."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import zoo.ops
from zoo.ops import config


@pytest.mark.parametrize("value, kernels", [("0", set()), ("off", set()), ("1", {"aggregate", "score"}),
                                            ("score", {"score"}), ("Aggregate", {"aggregate"}),
                                            ("score,aggregate", {"aggregate", "score"}), ("", {"aggregate", "score"})])
def test_env_var_values(value, kernels, monkeypatch):
    monkeypatch.setenv(config.FUSED_ENV, value)
    assert config._from_env() == config.FusedConfig(frozenset(kernels), config.FUSED_MIN_ELEMENTS)


def test_a_bad_env_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(config.FUSED_ENV, "fast")
    with pytest.raises(ValueError, match="ZOO_FUSED='fast'.*unknown fused kernel"):
        config._from_env()


def test_env_var_is_read_at_import():
    env = {**os.environ, config.FUSED_ENV: "0"}
    code = "import zoo.ops; c = zoo.ops.use_fused(); print(sorted(c.kernels))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_default_is_everything_fused():
    if os.environ.get(config.FUSED_ENV):
        pytest.skip("ZOO_FUSED is set for this run")
    assert zoo.ops.use_fused() == config.FusedConfig(frozenset({"score", "aggregate"}), config.FUSED_MIN_ELEMENTS)


def test_context_manager_restores_the_previous_setting_also_on_error():
    before = zoo.ops.use_fused()
    with zoo.ops.fused(False) as inside:
        assert not inside.score and not inside.aggregate and zoo.ops.use_fused() is inside
        with zoo.ops.fused("score", min_elements=0):
            assert zoo.ops.use_fused().kernels == {"score"} and zoo.ops.use_fused().min_elements == 0
        assert zoo.ops.use_fused() is inside
    assert zoo.ops.use_fused() is before
    with pytest.raises(RuntimeError):
        with zoo.ops.fused(False):
            raise RuntimeError("boom")
    assert zoo.ops.use_fused() is before


def test_set_fused_returns_the_previous_setting_for_restore():
    before = zoo.ops.use_fused()
    previous = zoo.ops.set_fused(["aggregate"], min_elements=5)
    try:
        assert previous is before
        assert zoo.ops.use_fused() == config.FusedConfig(frozenset({"aggregate"}), 5)
    finally:
        config.restore(previous)
    assert zoo.ops.use_fused() is before


@pytest.mark.parametrize("bad, error", [("fastest", ValueError), (["score", "kernel"], ValueError), (3, TypeError)])
def test_bad_choices_are_refused_with_one_line(bad, error):
    before = zoo.ops.use_fused()
    with pytest.raises(error, match="set_fused"):
        zoo.ops.set_fused(bad)
    with pytest.raises(ValueError, match="min_elements"):
        zoo.ops.set_fused(True, min_elements=-1)
    assert zoo.ops.use_fused() is before
