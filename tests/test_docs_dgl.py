"""docs/dgl.md's training loop runs against real DGL (``make test-dgl``)."""
from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.dgl_support import real_dgl

pytestmark = pytest.mark.dgl


def test_the_dgl_training_loop_in_the_docs_runs(capsys):
    real_dgl()
    text = (REPO / "docs" / "dgl.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/dgl.md", "exec"), {})
    assert "attention of DGL edge 0" in capsys.readouterr().out
