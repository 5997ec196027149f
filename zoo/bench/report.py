"""Old import path, kept for one release: re-exports zoo.bench.render.report (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.analyze.status import *  # noqa: F401,F403
from zoo.bench.render.report import *  # noqa: F401,F403
from typing import Any as _Any

from zoo.bench.publish import write_report as _write_report
from zoo.bench.render.report import to_html as _to_html, to_markdown as _to_markdown
from zoo.cli import REPORT_DEFAULTS as _DEFAULTS, report_sources as _report_sources

DEFAULT_RECORDS, DEFAULT_MD, DEFAULT_HTML = _DEFAULTS.records, _DEFAULTS.md, _DEFAULTS.html
COMMAND = _DEFAULTS.command


def generate(records_dir: _Any = DEFAULT_RECORDS, md: _Any = DEFAULT_MD, html_path: _Any = DEFAULT_HTML,
             notes_path: _Any = None, check: bool = False, draft: bool = False) -> _Any:
    """The old entry point: :func:`zoo.bench.publish.write_report` with this repository's layout."""
    return _write_report(records_dir, md, html_path, _report_sources(), notes_path=notes_path, check=check,
                         draft=draft)


def to_markdown(report: _Any) -> str:  # noqa: F811
    """The old signature: the Markdown page with this repository's layout."""
    return _to_markdown(report, _report_sources())


def to_html(report: _Any) -> str:  # noqa: F811
    """The old signature: the HTML page with this repository's layout."""
    return _to_html(report, _report_sources())
from zoo.bench.analyze.status import cell_keys as _cell_keys  # noqa: F401
