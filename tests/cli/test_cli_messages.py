"""One-line answers of the CLI and zoo.fit to small mistakes: aliases listed, a conflicting key is
bad input (exit 2, not 1), other libraries' key names point at the zoo's, a closed pipe is quiet."""
from __future__ import annotations

import pytest

import zoo
from zoo.cli import errors, main


def test_a_closed_pipe_ends_quietly(monkeypatch, capsys):
    import builtins

    def closed(*args, **kwargs):
        if kwargs.get("file") is None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(builtins, "print", closed)
    assert main(["list", "inits"]) == errors.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_list_inits_shows_the_aliases(capsys):
    assert main(["list", "inits"]) == 0
    out = capsys.readouterr().out
    assert "balanced_orthogonal (bal_o, " in out and "xavier (glorot, xav)" in out


def test_a_key_given_as_an_option_and_with_set_is_bad_input(capsys):
    code = main(["train", "--model", "gat", "--dataset", "cornell", "--num-layers", "2", "--set", "num_layers=3"])
    assert code == errors.EXIT_ERROR
    assert "'num_layers' is given twice (as an option and with --set)" in capsys.readouterr().err


def test_other_libraries_key_names_point_at_the_zoos():
    with pytest.raises(ValueError, match=r"'learning_rate' \(did you mean 'lr'\?\)"):
        zoo.fit("gat", "cornell", learning_rate=0.1, epochs=1)
    with pytest.raises(ValueError, match=r"'max_epochs' \(did you mean 'epochs'\?\)"):
        zoo.fit("gat", "cornell", max_epochs=3, epochs=1)


def test_fit_refuses_init_and_inits_together():
    with pytest.raises(ValueError, match="zoo.fit got init='bal_o' and inits=\\['xavier'\\]: give one"):
        zoo.fit("gat", "cornell", init="bal_o", inits=["xavier"], epochs=1)


def test_a_python_device_error_speaks_python(monkeypatch):
    import torch

    from zoo.trainer.cells import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="use device='cpu' \\(CLI: --device cpu\\)"):
        resolve_device("cuda")


def test_diagnose_names_an_excluded_init_in_one_line(tmp_path, capsys):
    code = main(["diagnose", "gat", "--dataset", "cornell", "--norm", "none,lipschitz", "--inits", "xavier,bal_o",
                     "--epochs", "1", "--num-layers", "2", "--out", str(tmp_path / "d.html")])
    err = capsys.readouterr().err
    assert code == 0 and (tmp_path / "d.html").is_file()
    assert "zoo diagnose: warning: init 'bal_o' excluded for norm=lipschitz: norm 'lipschitz'" in err
    assert "UserWarning" not in err
