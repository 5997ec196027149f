"""Where a reproduction report's records, notes and pages live (:class:`ReportSources`): a leaf, so
that ``zoo report``'s parser names its defaults without importing the report's statistics."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReportSources:
    """The paths a report names (as written on the page, relative to ``root``) and the repository ``root``."""

    records: str   # folder of record folders, e.g. "docs/reproduction/records"
    notes: str     # notes file, e.g. "docs/reproduction/notes.toml"
    md: str        # the Markdown page
    html: str      # the HTML page
    root: Path     # record folders are shown relative to it
    reported: str = "benchmarks/suites/reported/*.json"  # where the papers' numbers are stored

    @property
    def command(self) -> str:
        """The command that regenerates the pages."""
        return f"zoo report {self.records} --md {self.md} --html {self.html}"
