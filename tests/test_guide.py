"""docs/guide.md: every Python block runs, in order, in one namespace (as a notebook would)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

GUIDE = REPO / "docs" / "guide.md"


def blocks(text: str):
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_guide_has_the_three_steps():
    code = "\n".join(blocks(GUIDE.read_text()))
    for call in ("zoo.fit(", "zoo.save(", "zoo.load(", "zoo.diagnose("):
        assert call in code


@pytest.mark.slow
def test_every_guide_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the guide writes its checkpoint and page in the working directory
    namespace = {"__name__": "guide"}
    for i, block in enumerate(blocks(GUIDE.read_text()), 1):
        try:
            exec(compile(block, f"docs/guide.md block {i}", "exec"), namespace)
        except Exception as e:  # name the block that failed
            raise AssertionError(f"docs/guide.md block {i} failed: {type(e).__name__}: {e}") from e
    assert (tmp_path / "diagnose.html").is_file() and (tmp_path / "gat_l10_bal_o.safetensors").is_file()
