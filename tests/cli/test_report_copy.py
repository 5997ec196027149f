"""zoo report names record folders relative to the checkout holding them, so a copy of the
repository regenerates (and --check accepts) the same pages."""
from __future__ import annotations


from zoo.bench.render.report import _display_path
from zoo.cli.report import REPORT_DEFAULTS, report_sources


def test_a_copy_of_the_checkout_is_its_own_root(tmp_path):
    records = tmp_path / "copy" / REPORT_DEFAULTS.records
    sources = report_sources(records)
    assert sources.root == tmp_path / "copy"
    shown = _display_path(records / "balance_table2", sources.root)
    assert shown == f"{REPORT_DEFAULTS.records}/balance_table2"  # as the repository's own pages show it
    assert _display_path(records / "balance_table2", REPORT_DEFAULTS.root) == "balance_table2"  # the old root


def test_records_elsewhere_keep_the_package_checkout(tmp_path):
    assert report_sources(tmp_path / "somewhere").root == REPORT_DEFAULTS.root
    assert report_sources().root == REPORT_DEFAULTS.root

