"""The diagnose page: one self-contained HTML document (inline SVG and CSS; no JavaScript, no
network) from the numbers of a :class:`~zoo.diagnostics.recorders.LayerRecorder`.  Rendering only:
:func:`render_page` returns a string; writing it is the caller's (``zoo.diagnose``).

Sections: the verdict (:mod:`zoo.diagnostics.verdict`); the configurations side by side with
their selected-epoch metrics; training curves; one row of layer x epoch heat maps per quantity
(one map per configuration, a shared colour scale per row); per-layer curves of the relative
gradient norm; the energy and the effective rank against depth at the first and last epoch.
"""
from __future__ import annotations

import html
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from zoo.diagnostics.svg import color_scale, family_colors, fmt, heatmap, line_chart, value_range
from zoo.diagnostics.verdict import replica_findings, verdict

__all__ = ["render_page", "replica_colors", "HEATMAPS"]

#: (key, title, log colour scale, what it shows)
HEATMAPS = [
    ("grad_w", "relative gradient ‖∇W‖/‖W‖", True,
     "How strongly each layer's feature weights are pushed, relative to their size (balance paper §7). "
     "Orders of magnitude between layers: the early layers cannot learn."),
    ("change_w", "weight change ‖W−W₀‖/‖W₀‖", True, "How far each layer's weights moved from initialisation."),
    ("grad_a", "relative gradient ‖∇a‖/‖a‖", True, "The same for the attention parameters (n/a where a = 0)."),
    ("change_a", "attention parameter change ‖a−a₀‖", True, "Absolute, since balanced inits start at a = 0."),
    ("entropy", "attention entropy (1 = uniform)", False,
     "Mean entropy of each node's attention over its neighbours, divided by its maximum log(degree)."),
    ("self_attention", "self-attention α_vv", False,
     "Mean attention of each node on itself (GATE paper): 1 = the layer ignores the neighbours (a perceptron)."),
    ("attention_change", "attention change |α−α₀|", True, "Mean change of the attention coefficients per edge."),
    ("laplacian", "Laplacian energy of X^l", True,
     "Node dissimilarity of each layer's output (nonlocal paper §2); collapsing with depth = oversmoothing."),
    ("dirichlet", "Dirichlet energy of X^l", True, "As above, with the Dirichlet energy."),
    ("effective_rank", "effective rank of X^l", True,
     "exp(entropy of the normalised singular values) of each layer's output (Zhang et al. 2025): falling to 1 = "
     "rank collapse, which can show where the energies stay put."),
    ("numerical_rank", "numerical rank ‖X‖²_F/‖X‖²_2 of X^l", True, "As above, with the numerical (stable) rank."),
    ("c", "balance max|c| (hidden layers)", True,
     "Degree of balancedness (Eq. 5); 0 after a balanced init, conserved by gradient flow."),
    ("delta", "gradient identity max|δ|", True,
     "Eq. 7: zero up to rounding for positively homogeneous activations (Theorem 2.2)."),
]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1280px;
color:#222;padding:0 16px;line-height:1.4}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.sub{color:#666;font-size:13px}.verdict{background:#f6f8fa;border-left:4px solid #4e79a7;padding:10px 14px;
font-size:15px}table{border-collapse:collapse;font-size:12.5px}td,th{border:1px solid #ddd;padding:3px 8px;
text-align:left}th{background:#f3f3f3}tr.diff td{background:#fff7e0;font-weight:600}.row{display:flex;flex-wrap:wrap;
gap:10px;align-items:flex-start}.cap{font-size:12px;color:#555;margin:2px 0 6px}.status-untrainable{color:#b00020}
.status-trains{color:#2e7d32}.status-stalls{color:#b26a00}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _value(v: Any) -> str:
    if isinstance(v, float):
        return fmt(v)
    if isinstance(v, (dict, list)) and not v:
        return "—"
    return "—" if v is None else str(v)


def _config_table(labels: Sequence[str], configs: Sequence[Mapping[str, Any]], findings: Sequence[Dict[str, Any]],
                  final: Sequence[Mapping[str, Any]], best: Sequence[Any]) -> str:
    keys: List[str] = []
    for c in configs:
        for k in c:
            if k not in keys:
                keys.append(k)
    rows = ["<table><tr><th>configuration</th>" + "".join(f"<th>{_esc(l)}</th>" for l in labels) + "</tr>"]
    for k in keys:
        vals = [_value(c.get(k)) for c in configs]
        cls = ' class="diff"' if len(set(vals)) > 1 else ""
        rows.append(f"<tr{cls}><td>{_esc(k)}</td>" + "".join(f"<td>{_esc(v)}</td>" for v in vals) + "</tr>")
    rows.append("<tr><th colspan='%d'>outcome</th></tr>" % (len(labels) + 1))
    status = [f'<span class="status-{f["status"]}">{f["status"]}</span>' for f in findings]
    rows.append("<tr><td>verdict</td>" + "".join(f"<td>{s}</td>" for s in status) + "</tr>")
    rows.append("<tr><td>selected epoch</td>" + "".join(f"<td>{_esc(_value(b))}</td>" for b in best) + "</tr>")
    for key in ("train", "val", "test", "train_loss", "stop_reason"):
        vals = [_value(f.get(key)) for f in final]
        rows.append(f"<tr><td>{key}</td>" + "".join(f"<td>{_esc(v)}</td>" for v in vals) + "</tr>")
    rows.append("</table>")
    return "".join(rows)


def replica_colors(labels: Sequence[str], configs: Sequence[Mapping[str, Any]]) -> List[str]:
    """A line colour per replica: one hue family per init (per model, then per norm, when the
    replicas share one init), the replicas of a family (other seeds, norms) in its shades."""
    for key in ("init", "model", "norm"):
        values = [c.get(key) for c in configs]
        if len(set(map(repr, values))) > 1:
            return family_colors(map(repr, values))
    return family_colors([0] * len(labels))


def _curves(data: Dict[str, Any]) -> str:
    epochs = list(map(int, data["epochs"]))
    labels, colors = data["labels"], data["colors"]
    charts = []
    for key, title, log in (("train", "training metric", False), ("val", "validation metric", False),
                            ("train_loss", "training loss", True)):
        if key not in data:
            continue
        series = [(labels[r], epochs, data[key][:, r].tolist(), colors[r]) for r in range(len(labels))]
        charts.append(line_chart(series, title=title, log=log, ylim=None if log else (0, 1)))
    return '<div class="row">' + "".join(charts) + "</div>"


def _heatmap_rows(data: Dict[str, Any]) -> str:
    epochs = list(map(int, data["epochs"]))
    labels = data["labels"]
    out = []
    for key, title, log, caption in HEATMAPS:
        arr = data.get(key)
        if arr is None or arr.shape[-1] == 0 or not np.isfinite(arr).any():
            continue
        vrange = value_range([arr], log)
        width = max(260, min(600, 1240 // len(labels) - 12))  # side by side across the page
        maps = [heatmap(arr[:, r, :].T, xs=epochs, title=f"{labels[r]}", log=log, vrange=vrange, width=width,
                        height=max(190, min(260, 60 + 16 * arr.shape[-1])))
                for r in range(len(labels))]
        out.append(f"<h3 style='font-size:14px;margin:14px 0 0'>{_esc(title)}</h3><p class='cap'>{_esc(caption)}</p>"
                   f'<div class="row">{"".join(maps)}</div>')
    return "".join(out)


def _layer_curves(data: Dict[str, Any]) -> str:
    epochs = list(map(int, data["epochs"]))
    labels = data["labels"]
    charts = []
    grad = data["grad_w"]
    L = grad.shape[-1]
    lo, hi = value_range([grad], True)
    for r in range(len(labels)):
        series = [(f"layer {i + 1}", epochs, grad[:, r, i].tolist(), _layer_color(i, L)) for i in range(L)]
        charts.append(line_chart(series, title=f"‖∇W‖/‖W‖ per layer — {labels[r]}", log=True,
                                 ylim=(10 ** lo, 10 ** hi), legend=L <= 12))
    lap = data["laplacian"]
    if np.isfinite(lap).any():
        series, dashed = [], []
        layers = list(range(1, lap.shape[-1] + 1))
        for r in range(len(labels)):
            color = data["colors"][r]
            series.append((f"{labels[r]} epoch {epochs[0]}", layers, lap[0, r, :].tolist(), color))
            series.append((f"{labels[r]} epoch {epochs[-1]}", layers, lap[-1, r, :].tolist(), color))
            dashed += [True, False]
        charts.append(line_chart(series, title="Laplacian energy vs depth (dashed: first epoch)", xlabel="layer",
                                 log=True, dashed=dashed))
    rank = data.get("effective_rank")
    if rank is not None and np.isfinite(rank).any():
        charts.append(_first_last(data, rank, "effective rank vs depth (dashed: first epoch)"))
    return '<div class="row">' + "".join(charts) + "</div>"


def _first_last(data: Dict[str, Any], arr: Any, title: str) -> str:
    """A per-layer quantity against depth at the first (dashed) and last recorded epoch."""
    epochs, labels = list(map(int, data["epochs"])), data["labels"]
    layers = list(range(1, arr.shape[-1] + 1))
    series, dashed = [], []
    for r in range(len(labels)):
        color = data["colors"][r]
        series.append((f"{labels[r]} epoch {epochs[0]}", layers, arr[0, r, :].tolist(), color))
        series.append((f"{labels[r]} epoch {epochs[-1]}", layers, arr[-1, r, :].tolist(), color))
        dashed += [True, False]
    return line_chart(series, title=title, xlabel="layer", log=True, dashed=dashed)


def _layer_color(i: int, L: int) -> str:
    return color_scale(0.9 * i / max(L - 1, 1))


def render_page(data: Dict[str, Any], *, title: str, configs: Optional[Sequence[Mapping[str, Any]]] = None,
                subtitle: str = "", verdict_text: Optional[str] = None) -> str:
    """The diagnose page as an HTML string.

    ``data``: :meth:`LayerRecorder.arrays` plus ``best_epoch`` and ``final`` (per replica, from
    ``zoo.fit``'s History); ``configs``: each replica's configuration (shown side by side, rows that
    differ highlighted); ``verdict_text``: default :func:`zoo.diagnostics.verdict.verdict` of ``data``.
    """
    labels = list(data["labels"])
    R = len(labels)
    configs = list(configs) if configs is not None else [{} for _ in labels]
    if len(configs) != R:
        raise ValueError(f"configs has {len(configs)} entries for {R} replicas; give one configuration per replica")
    findings = [replica_findings(data, r) for r in range(R)]
    data = {**data, "colors": replica_colors(labels, configs)}
    text = verdict(data) if verdict_text is None else verdict_text
    final = list(data.get("final") or [{} for _ in labels])
    best = list(data.get("best_epoch") or [None] * R)
    epochs = list(map(int, data["epochs"]))
    body = [
        f"<h1>{_esc(title)}</h1>",
        f'<div class="sub">{_esc(subtitle)}{" · " if subtitle else ""}recorded at epochs '
        f'{epochs[0]}–{epochs[-1]} ({len(epochs)} states)</div>',
        "<h2>Verdict</h2>", f'<p class="verdict">{"<br>".join(_esc(line) for line in text.splitlines())}</p>',
        "<h2>Configurations</h2>", _config_table(labels, configs, findings, final, best),
        "<h2>Training</h2>", _curves(data),
        "<h2>Layer × epoch</h2>", _heatmap_rows(data),
        "<h2>Per-layer curves</h2>", _layer_curves(data),
    ]
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>" + _esc(title) + "</title>"
            f"<style>{_CSS}</style></head><body>" + "".join(body) + "</body></html>\n")
