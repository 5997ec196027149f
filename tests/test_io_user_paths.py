"""Paths as a user writes them: ``~`` expanded everywhere, an existing folder written into, a path below a
file refused in one line (zoo.save, zoo.diagnose's page, the loggers, the CLI)."""
from __future__ import annotations

import pytest

import zoo
from zoo.trainer.loggers import CSVLogger


def _model():
    return zoo.build("gat", in_dim=4, out_dim=3, num_layers=1, hidden_dim=4)


def test_a_tilde_is_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    written = zoo.save(_model(), "~/m5")
    assert written == tmp_path / "m5.safetensors" and written.is_file()
    assert not (tmp_path / "~").exists()  # not a literal folder named "~"
    assert zoo.load("~/m5").build_config["name"] == "gat"
    assert CSVLogger("~/fit.csv").path == tmp_path / "fit.csv"
    from zoo.cli.args import user_path  # the CLI's path arguments

    assert user_path("~/runs") == str(tmp_path / "runs")


def test_an_existing_folder_is_written_into(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    assert zoo.save(_model(), folder) == folder / "model.safetensors"  # as zoo.diagnose(out=folder) does
    assert zoo.load(folder).build_config["name"] == "gat"
    assert CSVLogger(folder).path == folder / "fit.csv"


def test_a_path_below_a_file_is_one_line(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match=f"cannot write {afile}/m.safetensors: {afile} is a file, not a folder"):
        zoo.save(_model(), afile / "m")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        CSVLogger(afile / "sub" / "fit.csv")
    from zoo.diagnosing import _write

    with pytest.raises(ValueError, match="is a file, not a folder"):
        _write(afile / "page.html", "<html></html>")
