"""The leaderboard page as a reader sees it: no literal Markdown backticks, a
labelled epochs column, the paper by title, epochs-to-best whiskers that stop at 0."""
from __future__ import annotations

import re

from zoo.bench.analyze.board import aggregate
from zoo.bench.render import html as page
from zoo.bench.render.html import to_html
from tests.bench.render.test_render import _info, _record


def _board(epochs=(1, 40)):
    info = _info()
    info["meta"]["paper"] = "are-gats-out-of-balance"
    recs = []
    for seed, e in enumerate(epochs):
        for layers in (2, 4):
            r = _record(layers, 0.5 + 0.1 * seed, seed=seed)
            r["epochs_to_best"] = e
            recs.append(r)
    return aggregate(info, recs)


def test_page_text():
    text = to_html([_board()])
    body = re.sub(r"<svg.*?</svg>", "", text, flags=re.S)  # plots aside
    assert "`" not in body, "Markdown backticks shown literally"
    assert "Are GATs Out of Balance? (Mustafa, Bojchevski, Burkholz; NeurIPS 2023)" in body
    assert "Paper: are-gats-out-of-balance" not in body
    assert "<th>epochs</th>" not in body and "epochs to best<br>(num_layers=2)" in body


def test_epochs_to_best_whiskers_stop_at_zero(monkeypatch):
    """Epochs 1 and 40 over two seeds: mean 20.5 with a 95 % CI far wider than 20.5."""
    import matplotlib.axes

    calls = []
    real = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, yerr=None, **kw):
        calls.append((list(y), [list(v) for v in yerr]))
        return real(self, x, y, yerr=yerr, **kw)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    board = _board()
    for table, t in page.tables(board).items():
        page._plot(board, table, t, "epochs")
    (means, (low, high)), = calls
    assert all(m - lo >= 0 for m, lo in zip(means, low)) and any(hi > m for m, hi in zip(means, high))
