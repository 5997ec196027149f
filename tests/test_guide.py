"""docs/guide.md: every Python block runs, in order, in one namespace (as a notebook would)."""
from __future__ import annotations

import math
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
    from zoo.datasets import DATASETS

    namespace = {"__name__": "guide"}
    try:
        for i, block in enumerate(blocks(GUIDE.read_text()), 1):
            try:
                exec(compile(block, f"docs/guide.md block {i}", "exec"), namespace)
            except Exception as e:  # name the block that failed
                raise AssertionError(f"docs/guide.md block {i} failed: {type(e).__name__}: {e}") from e
    finally:
        DATASETS._items.pop("my_graph", None)  # the guide registers its own graph
    assert (tmp_path / "diagnose.html").is_file() and (tmp_path / "gat_l10_bal_o.safetensors").is_file()


def test_your_own_graph_and_logging_sections_run(monkeypatch, tmp_path):
    """The "your own graph", "logging" and "training options" sections (small graphs: fast enough for the
    default run)."""
    from zoo.datasets import DATASETS

    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "guide", "zoo": __import__("zoo")}
    try:
        text = GUIDE.read_text()
        for i, block in enumerate(blocks(text[text.index("## 4. Your own graph"):]), 1):
            try:
                exec(compile(block, f"docs/guide.md sections 4-6 block {i}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(f"docs/guide.md sections 4-6 block {i} failed: {type(e).__name__}: {e}") from e
    finally:
        DATASETS._items.pop("my_graph", None)
    assert namespace["history"].cells[0].config["task"]["dataset"] == "my_graph"
    assert (tmp_path / "fit.csv").is_file() and (tmp_path / "val.png").is_file()
    assert any((tmp_path / "runs" / "gat_l4").glob("events.out.tfevents.*")) and (tmp_path / "mlflow.db").is_file()
    assert namespace["task"].split_sizes() == {"train": 180, "val": 60, "test": 60}
    assert namespace["scheduled"].results[0].extra["last_step_lr"] == pytest.approx(0.01 * (1 + math.cos(29 * math.pi / 30)))
