"""zoo.diagnose / zoo diagnose: train, record, verdict, page; from a name, a model or a checkpoint."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest

import zoo
from zoo.cli import main

SMALL = dict(num_layers=3, hidden_dim=8, epochs=3)


def test_diagnose_writes_the_page(tmp_path):
    d = zoo.diagnose("gat", "cornell", inits=["xavier", "bal_o"], out=tmp_path / "page.html", **SMALL)
    assert d.path == tmp_path / "page.html" and d.path.read_text(encoding="utf-8") == d.html
    assert d.data["labels"] == ["xavier", "balanced_orthogonal"]  # one seed: the inits name the columns
    assert "xavier" in d.verdict and "balanced_orthogonal" in d.verdict
    page = d.html.replace("&#x27;", "'")
    assert all(line in page for line in d.verdict.splitlines())  # the page breaks the verdict's lines


def test_diagnose_from_a_checkpoint(tmp_path):
    model = zoo.build("gat", in_dim=1703, out_dim=5, num_layers=2, hidden_dim=8, init="bal_o")
    path = zoo.save(model, tmp_path / "m")
    d = zoo.diagnose(path, "cornell", epochs=2)
    assert d.data["change_w"].shape == (3, 1, 2) and (d.data["change_w"][0] == 0).all()
    with pytest.raises(ValueError, match="needs a task"):
        zoo.diagnose(path, epochs=1)


def test_cli_diagnose(tmp_path, capsys):
    out = tmp_path / "d.html"
    assert main(["diagnose", "gat", "--dataset", "cornell", "--num-layers", "2", "--inits", "xavier,bal_o",
                 "--epochs", "2", "--out", str(out)]) == 0
    assert out.is_file() and "verdict:" in capsys.readouterr().out
    assert main(["diagnose", "gat", "--dataset", "cornell", "--num-layers", "2", "--set", "warp=1",
                 "--epochs", "1", "--out", str(out)]) == 2
    assert "warp" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium (apt-get install -y chromium)")
def test_diagnose_page_renders_in_headless_chromium(tmp_path):
    """The issue's page: Xavier vs Bal_O at L = 10 on Cora, opened offline by headless Chromium."""
    from PIL import Image

    d = zoo.diagnose("gat", "cora", num_layers=10, inits=["xavier", "bal_o"], epochs=20, every=2,
                     out=tmp_path / "diagnose.html")
    shot = tmp_path / "shot.png"
    start = time.perf_counter()
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1320,2400", f"--screenshot={shot}", d.path.as_uri()],
                   check=True, capture_output=True, timeout=120)
    seconds = time.perf_counter() - start
    image = Image.open(shot).convert("RGB")
    assert image.size == (1320, 2400)
    colours = image.resize((66, 120)).getcolors(maxcolors=66 * 120)
    assert colours is not None and len(colours) > 50  # charts, not a blank or error page
    assert "untrainable" in d.verdict and "balanced_orthogonal trains" in d.verdict
    print(f"chromium screenshot in {seconds:.1f} s; page {len(d.html)} bytes; diagnose {d.seconds:.1f} s")


def test_diagnose_compares_separately_trained_configurations():
    """Models or norms side by side (e.g. Pre-LN vs nonlocal): one fit each, merged on the page."""
    d = zoo.diagnose("san_pre_ln,san_nonlocal", "cornell", num_layers=2, hidden_dim=8, epochs=2,
                     optimizer="adam", lr=0.01)
    assert d.data["labels"] == ["san_pre_ln", "san_nonlocal"] and len(d.history) == 2
    assert d.data["grad_w"].shape == (3, 2, 2) and d.data["laplacian"].shape == (3, 2, 2)
    assert "<td>san_pre_ln</td><td>san_nonlocal</td>" in d.html
    n = zoo.diagnose("gat", "cornell", num_layers=2, hidden_dim=8, epochs=1, norm=["none", "pairnorm"])
    assert n.data["labels"] == ["norm=none", "norm=pairnorm"]
    with pytest.raises(TypeError, match="compare must be"):
        zoo.diagnose("gat", "cornell", epochs=1, compare=[3])


def _graph(n=40, classes=3):
    import torch
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(n, 5, generator=g), edge_index=torch.randint(0, n, (2, 4 * n), generator=g),
                y=torch.arange(n) % classes, num_nodes=n)
    data.train_mask, data.val_mask, data.test_mask = (torch.arange(n) % 3 == k for k in range(3))
    return data


def test_diagnose_takes_every_task_form_fit_takes():
    """``zoo.diagnose(model, task)`` trains the cells ``zoo.fit(model, task)`` would: a dataset name, a
    loaded task, a PyG Data (masks or split ratios), a Task and a DGL graph."""
    from tests.dgl_support import DGLLike
    from zoo.datasets import Task, load

    data = _graph()
    forms = [("cornell", {}), (load("cornell"), {}), (data, {}), (data, {"split": (0.5, 0.25), "data_seed": 1}),
             (Task.from_data(data, name="diagnosed"), {}), (DGLLike(data), {})]
    for task, opts in forms:
        d = zoo.diagnose("gat", task=task, num_layers=2, hidden_dim=8, epochs=1, **opts)
        fitted = zoo.fit("gat", task, num_layers=2, hidden_dim=8, epochs=1, keep_models=False, **opts)
        assert [c.id for c in d.history.cells] == [c.id for c in fitted.cells], type(task).__name__


def test_diagnose_compares_configurations_on_one_raw_graph():
    """A raw graph with split ratios is made a task once: every configuration compared gets its masks."""
    with pytest.warns(UserWarning, match="init 'bal_o' excluded for norm=lipschitz"):
        d = zoo.diagnose("gat", _graph(), split=(0.5, 0.25), num_layers=2, hidden_dim=8, epochs=1,
                         inits=["xavier", "bal_o"], norm=["none", "lipschitz"])
    prints = {c.config["task"]["fingerprint"] for h in d.history for c in h.cells}
    assert len(prints) == 1 and len(d.data["labels"]) == 3  # bal_o excluded with lipschitz


def test_diagnose_names_its_task_argument_as_fit_does():
    with pytest.raises(ValueError, match="needs a task as its second argument"):
        zoo.diagnose("gat", dataset="cornell", epochs=1)
    with pytest.raises(ValueError, match="dataset='texas' would replace the task given \\('cornell'\\)"):
        zoo.diagnose("gat", "cornell", dataset="texas", epochs=1)
