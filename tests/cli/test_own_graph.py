"""A suite on one's own graph runs from the command line: ``--import MODULE`` or the suite's ``plugins``
key imports the module that registers it, here and in worker processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from zoo.cli import main

MODULE = '''
import torch
from torch_geometric.data import Data
from zoo.datasets import Task, register_dataset


@register_dataset("{name}", kind="transductive", metric="accuracy", source="a test's own graph")
def load(root, split, seed, **options):
    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(40, 5, generator=g), edge_index=torch.randint(0, 40, (2, 160), generator=g),
                y=torch.arange(40) % 3)
    return Task.from_data(data, name="{name}", split=(0.5, 0.25), seed=seed)
'''


def _suite(tmp_path, name, plugins=None, grid="seed = [0, 1]"):
    (tmp_path / f"{name}.py").write_text(MODULE.format(name=name))
    head = f"[suite]\nname = \"{name}_suite\"\n" + (f"plugins = {json.dumps(plugins)}\n" if plugins else "")
    path = tmp_path / f"{name}.toml"
    path.write_text(head + f"[defaults]\ndataset = \"{name}\"\nmodel = \"gat\"\nnum_layers = 1\nhidden_dim = 8\n"
                           f"epochs = 2\n[grid]\n{grid}\n")
    return path


@pytest.fixture
def registrations(monkeypatch):
    """Registrations and imports made by a test end with it."""
    from zoo import _user_modules as user_modules
    from zoo.datasets import DATASETS

    monkeypatch.setattr(DATASETS, "_items", dict(DATASETS._items))
    monkeypatch.setattr(user_modules, "_IMPORTED", [])
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("own_graph"):
            del sys.modules[name]


def test_import_runs_a_suite_on_a_registered_graph(tmp_path, monkeypatch, capsys, registrations):
    suite = _suite(tmp_path, "own_graph_a")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "o"
    args = ["bench", str(suite), "--workers", "1", "--quiet", "--no-leaderboard", "--out", str(out)]
    assert main(args) == 2  # without the module the name is unknown ...
    assert "unknown dataset 'own_graph_a'" in capsys.readouterr().err
    assert main([*args, "--import", "own_graph_a"]) == 0  # ... with it, the suite runs
    assert "2 run(s) done now" in capsys.readouterr().out
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["config"]["task"]["fingerprint"] for r in records} != {None}  # its data is in the id


def test_a_module_that_cannot_be_imported_is_one_line(tmp_path, monkeypatch, capsys, registrations):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "datasets", "--import", "no_such_module_here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"zoo list: error: cannot import 'no_such_module_here': no such module in {tmp_path} or on the "
                   "Python path; give a module name or a .py file")


@pytest.mark.slow
def test_workers_import_the_suites_plugins(tmp_path):
    """``plugins = ["own_graph_b.py"]`` in the suite: the driver and both worker processes register it."""
    suite = _suite(tmp_path, "own_graph_b", plugins=["own_graph_b.py"], grid="hidden_dim = [8, 16]")  # 2 groups
    out = tmp_path / "o"
    env = {**os.environ, "ZOO_DATA": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "zoo", "bench", str(suite), "--workers", "2", "--quiet",
                           "--no-leaderboard", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "2 run(s) done now" in done.stdout and "process (2 workers)" in done.stdout
