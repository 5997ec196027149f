"""A shipped suite's bare name is that suite, whatever the working directory holds of that name."""
from __future__ import annotations

import pytest

from zoo.bench.suite.load import find_suite, suites_dir
from zoo.bench.suite.schema import SuiteError


def test_a_results_folder_named_like_the_suite_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quick").mkdir()  # zoo bench quick --out quick, run once already
    assert find_suite("quick") == suites_dir() / "quick.toml"
    with pytest.raises(SuiteError, match="is a directory, not a suite file"):
        find_suite("./quick")
    (tmp_path / "mine").mkdir()
    with pytest.raises(SuiteError, match="mine is a directory"):
        find_suite("mine")
