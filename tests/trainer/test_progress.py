"""zoo.fit / zoo.diagnose show a progress bar where someone watches, and write nothing to a log."""
from __future__ import annotations

import importlib

import zoo
from zoo.trainer import progress

FAST = dict(num_layers=2, hidden_dim=8, epochs=3, keep_models=False)


def test_progress_true_draws_a_bar_and_closes_it(capsys):
    zoo.fit("gat", "cornell", progress=True, **FAST)
    err = capsys.readouterr().err
    assert "zoo.fit:" in err and "/3 [" in err and err.endswith("\r")  # drawn, then cleared (leave=False)


def test_by_default_nothing_is_written_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    assert not progress.interactive()  # captured stderr is no terminal
    zoo.fit("gat", "cornell", **FAST)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "interactive", lambda: True)  # a terminal or a notebook: on by default
    monkeypatch.setattr(importlib.import_module("zoo.fitting"), "interactive", lambda: True)
    zoo.fit("gat", "cornell", **FAST)
    assert "zoo.fit" in capsys.readouterr().err
    zoo.fit("gat", "cornell", progress=False, **FAST)
    assert capsys.readouterr().err == ""


def test_the_runners_epoch_bar_stays_out_of_a_log(capsys):
    from types import SimpleNamespace

    from zoo.bench.run import executors

    cell = SimpleNamespace(epochs=100, config={"task": {"dataset": "cora"},
                                               "model": {"name": "gat", "kwargs": {"num_layers": 2}}})
    bar = executors.group_bar(SimpleNamespace(cells=[cell]))
    assert not bar.syncs_host  # it reads no metric: the loop keeps its check interval
    for epoch in range(101):
        bar.on_epoch_end(SimpleNamespace(epoch=epoch))
    bar.close()
    assert capsys.readouterr().err == ""
