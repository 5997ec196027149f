"""research/probe_lipschitz_released_code.py: how it runs the authors' released script and reads its log."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from tests.conftest import research_script

probe = research_script("probe_lipschitz_released_code.py")

LOG = """\
Epoch: 0000 loss_train: 1.9 acc_train: 0.2 loss_val: 1.9 acc_val: 0.3000 acc_test: 0.3100 time: 0.5s
Epoch: 0001 loss_train: 1.5 acc_train: 0.6 loss_val: 1.6 acc_val: 0.7920 acc_test: 0.7830 time: 0.5s
Epoch: 0002 loss_train: 1.2 acc_train: 0.8 loss_val: 1.4 acc_val: 0.7920 acc_test: 0.8000 time: 0.5s
Epoch: 0003 loss_train: 1.0 acc_train: 0.9 loss_val: 1.3 acc_val: 0.7700 acc_test: 0.7610 time: 0.5s
Test accuracy= 0.761
"""


def test_parse_log_reads_the_first_best_validation_epoch_and_the_scripts_final_test():
    r = probe.parse_log(7, LOG)
    assert (r.seed, r.best_epoch, r.epochs) == (7, 1, 4)
    assert r.best_val == pytest.approx(79.2) and r.test_at_best == pytest.approx(78.3)
    assert r.final_test == pytest.approx(76.1)


def test_parse_log_refuses_a_log_without_the_final_test():
    with pytest.raises(ValueError, match="no final 'Test accuracy='"):
        probe.parse_log(0, LOG.rsplit("Test", 1)[0])


def _import_shim(tmp_path, name):
    probe.write_shims(tmp_path)
    spec = importlib.util.spec_from_file_location(name, tmp_path / name / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_torch_scatter_shim_reduces_as_torch_scatter_does(tmp_path):
    """The released LipschitzNorm takes a per-node max of squared norms with torch_scatter.scatter(reduce='max')."""
    shim = _import_shim(tmp_path, "torch_scatter")
    src = torch.tensor([[1.0, 5.0], [3.0, 2.0], [4.0, 0.5]])
    index = torch.tensor([0, 0, 1])
    assert torch.equal(shim.scatter(src=src, index=index, dim=0, reduce="max"), torch.tensor([[3.0, 5.0], [4.0, 0.5]]))
    assert torch.equal(shim.scatter(src, index, dim=0, reduce="sum"), torch.tensor([[4.0, 7.0], [4.0, 0.5]]))
    assert torch.equal(shim.scatter_mean(src, index, dim=0), torch.tensor([[2.0, 3.5], [4.0, 0.5]]))


def test_prepare_copies_the_raw_files_and_names_the_fix_when_the_mirror_lacks_them(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    monkeypatch.setenv("ZOO_DATA_MIRROR", str(mirror))
    (mirror / "Cora" / "raw").mkdir(parents=True)
    (mirror / "Cora" / "raw" / "ind.cora.x").write_text("x")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    data = probe.prepare(scratch, "Cora")
    assert (data / "Cora" / "Cora" / "raw" / "ind.cora.x").read_text() == "x"
    assert sorted(p.name for p in (mirror / "Cora").iterdir()) == ["raw"]  # nothing written into the mirror
    with pytest.raises(SystemExit, match="set ZOO_DATA_MIRROR"):
        probe.prepare(tmp_path / "scratch2", "PubMed")


@pytest.mark.slow  # runs the released script in a subprocess (~11 s)
def test_run_one_seeds_the_script_and_lets_it_import_its_own_modules(tmp_path):
    """A stand-in for the released script: it imports a sibling package (as ``models.deepgat``) and prints the log
    format from torch's RNG, so equal seeds must give equal results and the wrapper must put its folder on sys.path."""
    code = tmp_path / "code"
    (code / "models").mkdir(parents=True)
    (code / "models" / "__init__.py").write_text("")
    (code / "models" / "draw.py").write_text("import torch\ndef draw():\n    return torch.rand(1).item()\n")
    (code / "train_deepgat_missing.py").write_text(textwrap.dedent("""\
        import sys
        from models.draw import draw
        assert "--nexps" in sys.argv and "--datadir" in sys.argv
        for epoch in range(3):
            print(f"Epoch: {epoch:04d} loss_train: 1 acc_train: 1 loss_val: 1 acc_val: {draw():.4f} "
                  f"acc_test: {draw():.4f} time: 0s")
        print(f"Test accuracy= {draw()}")
    """))
    scratch = tmp_path / "scratch"
    probe.write_shims(scratch)
    a, b, c = (probe.run_one(code, scratch, tmp_path, s, []) for s in (3, 3, 4))
    assert a == b and a != c
