"""The shipped suites, their reported numbers and findings, and the papers' text, for the tests of
tests/papers/ (each reads the data as shipped; the papers' text is skipped where absent)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import papers_dir

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
SUITES = REPO / "benchmarks" / "suites"
REPORTED = SUITES / "reported"


def reported(name: str) -> dict:
    return json.loads((REPORTED / f"{name}.json").read_text())


def suite(name: str) -> dict:
    return tomllib.loads((SUITES / f"{name}.toml").read_text())


def paper_text(name: str) -> str:
    return (papers_dir() / f"{name}.md").read_text()


def finding(name: str, fid: str) -> dict:
    return next(f for f in reported(name)["findings"] if f["id"] == fid)
