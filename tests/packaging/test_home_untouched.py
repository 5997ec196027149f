"""Importing the zoo and listing its suites writes nothing in the user's home folder: with a DGL installed
beside it, OGB's ``import dgl`` would print "DGL backend not selected" and write ``~/.dgl/config.json``."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

CODE = """
import zoo
from zoo.cli import main
main(["list", "suites"])
zoo.build("gcn", in_dim=9, out_dim=2, num_layers=1, input_encoder="atom")  # OGB's AtomEncoder
from zoo.datasets import Task
import torch
from torch_geometric.data import Data
"""


@pytest.mark.slow  # a fresh Python process importing torch, PyG and OGB
def test_nothing_is_written_in_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DGLBACKEND", "MPLCONFIGDIR", "XDG_CACHE_HOME",
                                                           "XDG_CONFIG_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DGL backend" not in done.stderr
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []


def _recipe(target: str) -> list:
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        out.append(line.strip())
    return out


def test_make_install_leaves_dgl_to_its_own_environment():
    assert not [line for line in _recipe("$(STAMP)") if "dgl" in line.lower()]  # .venv-dgl has it (make test-dgl)
    assert any("dgl==" in line for line in (REPO / "Makefile").read_text().splitlines()
               if line.startswith("DGL_PINS"))


def test_make_bench_builds_the_kernels_once_up_front():
    recipe = _recipe("bench")
    assert "zoo build-kernels" in recipe[0] and "zoo bench" in recipe[-1]
