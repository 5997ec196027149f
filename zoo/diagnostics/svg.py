"""Inline SVG charts for the diagnose page: heat maps and line charts as strings (no IO, no
JavaScript, no external resources; numpy only).

Colour scales: a sequential palette (viridis stops) for heat maps, on a log10 scale where the
values span orders of magnitude, its colour bar ticked at the powers of ten (``10⁻³``); nan /
inf cells are light grey.  Line colours: one hue family per group (the page's inits), shades
within it (:func:`family_colors`).  Every chart is a standalone ``<svg>`` element with a
``<title>`` per cell or line, so hovering in a browser shows the value.

Why hand-built and not matplotlib's SVG backend (used for every other zoo plot): rendering time,
measured.  The same diagnose page (L = 10 layers, 51 recorded epochs) drawn by matplotlib (one
figure per page row: ``imshow`` heat maps with a ``LogNorm`` colour bar, log-axis line charts,
``svg.fonttype = "none"``) took 30x (2 replicas) to 85x (4 replicas) the time of this module in
the same process, 1.0-1.3 s against 38-87 s on the project's shared 2-core machine under load,
most of it in matplotlib's tick layout and mathtext labels of the log axes; ``zoo diagnose``
would spend longer drawing than training a short run.  matplotlib's file is 3-3.6x smaller (its
heat maps are embedded PNGs, these one ``<rect>`` with a hover value per cell: 1.7 MB against
0.57 MB at 2 replicas), a size a browser opens at once.  Figures, date and load:
docs/notes/diagnose_page_svg.md, with the script that measured them.
"""
from __future__ import annotations

import html
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["heatmap", "line_chart", "color_scale", "FAMILIES", "family_colors", "decade_ticks", "fmt"]

# viridis at 0, 0.25, 0.5, 0.75, 1
_STOPS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
#: Hue families for grouped lines (ColorBrewer Blues, Oranges, Greens, Purples, Reds, Greys), dark
#: to light, each shade dark enough for a line on white.
FAMILIES = [["#08519c", "#3182bd", "#6baed6", "#9ecae1"], ["#a63603", "#e6550d", "#fd8d3c", "#fdae6b"],
            ["#006d2c", "#31a354", "#74c476", "#a1d99b"], ["#54278f", "#756bb1", "#9e9ac8", "#bcbddc"],
            ["#a50f15", "#de2d26", "#fb6a4a", "#fc9272"], ["#252525", "#636363", "#969696", "#bdbdbd"]]
MISSING = "#e6e6e6"
_SUPER = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
FONT = "font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def fmt(v: float) -> str:
    """A short number: 3 significant digits, scientific outside [1e-3, 1e4)."""
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a != 0 and (a < 1e-3 or a >= 1e4):
        return f"{v:.2e}"
    return f"{v:.3g}"


def family_colors(groups: Sequence[object]) -> List[str]:
    """A line colour per item: one hue family per distinct group (in order of first appearance),
    the items of a group in successive shades of it (dark first; cycling past four)."""
    family: dict = {}
    seen: dict = {}
    out = []
    for g in groups:
        f = family.setdefault(g, len(family)) % len(FAMILIES)
        k = seen.get(g, 0)
        seen[g] = k + 1
        out.append(FAMILIES[f][k % len(FAMILIES[f])])
    return out


def decade_ticks(lo: float, hi: float, max_ticks: int = 6) -> List[float]:
    """Ticks of a log10 axis from ``lo`` to ``hi`` (log10 units): the integer powers of ten inside,
    every k-th decade when there are more than ``max_ticks``; with fewer than two inside, the
    ends as well (so a narrow range still reads)."""
    first, last = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
    decades = list(range(first, last + 1))
    step = max(1, math.ceil(len(decades) / max_ticks))
    ticks = [float(d) for d in decades if d % step == 0] if step > 1 else [float(d) for d in decades]
    if len(ticks) < 2:  # the ends too, unless one would print over a decade's label
        ticks = sorted(set(ticks) | {e for e in (lo, hi) if all(abs(e - t) > 0.2 * (hi - lo) for t in ticks)})
    return ticks


def decade_label(u: float) -> str:
    """``10⁻³`` at an integer log10 value, else the number itself."""
    if abs(u - round(u)) < 1e-9:
        return "10" + str(int(round(u))).translate(_SUPER)
    return fmt(10 ** u)


def color_scale(t: float) -> str:
    """The palette colour at ``t`` in [0, 1] (clipped)."""
    t = min(max(t, 0.0), 1.0) * (len(_STOPS) - 1)
    i = min(int(t), len(_STOPS) - 2)
    f = t - i
    rgb = [round(a + (b - a) * f) for a, b in zip(_STOPS[i], _STOPS[i + 1])]
    return "#%02x%02x%02x" % tuple(rgb)


def value_range(arrays: Sequence[np.ndarray], log: bool) -> Tuple[float, float]:
    """Common (low, high) of the finite (positive, when ``log``) values of several arrays, in the
    scale's units (log10 when ``log``); ``(0, 1)`` when there are none."""
    vals = [np.asarray(a, dtype=float).ravel() for a in arrays]
    v = np.concatenate(vals) if vals else np.array([])
    v = v[np.isfinite(v)]
    if log:
        v = v[v > 0]
        v = np.log10(v) if v.size else v
    if not v.size:
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    return lo, hi


def heatmap(values: np.ndarray, *, xs: Sequence[int], title: str, log: bool = False,
            vrange: Optional[Tuple[float, float]] = None, width: int = 300, height: int = 190,
            ylabel: str = "layer", xlabel: str = "epoch", first_layer: int = 1) -> str:
    """Heat map of ``values`` ``(L, T)`` (layer x epoch; layer 1 at the bottom) with a colour bar.

    ``vrange`` fixes the colour range (in log10 units when ``log``), so maps side by side compare.
    """
    v = np.asarray(values, dtype=float)
    L, T = v.shape if v.ndim == 2 else (0, 0)
    lo, hi = vrange if vrange is not None else value_range([v], log)
    left, right, top, bottom = 34, 70, 22, 30
    pw, ph = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" style="{FONT}" role="img">',
             f'<text x="{left}" y="14" font-size="12" font-weight="600">{_esc(title)}</text>']
    if L and T:
        cw, ch = pw / T, ph / L
        for i in range(L):
            for j in range(T):
                x = v[i, j]
                ok = math.isfinite(x) and (x > 0 or not log)
                if ok:
                    t = ((math.log10(x) if log else x) - lo) / (hi - lo)
                    color = color_scale(t)
                else:
                    color = MISSING
                y = top + (L - 1 - i) * ch
                parts.append(f'<rect x="{left + j * cw:.2f}" y="{y:.2f}" width="{cw + 0.3:.2f}" height="{ch + 0.3:.2f}" '
                             f'fill="{color}"><title>layer {i + first_layer}, epoch {xs[j]}: {fmt(x)}</title></rect>')
        # axes: a few layer and epoch ticks
        for i in sorted({0, L - 1, (L - 1) // 2}):
            y = top + (L - 1 - i + 0.5) * ch
            parts.append(f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="9" text-anchor="end">{i + first_layer}</text>')
        for j in sorted({0, T - 1, (T - 1) // 2}):
            x = left + (j + 0.5) * cw
            parts.append(f'<text x="{x:.1f}" y="{top + ph + 11}" font-size="9" text-anchor="middle">{xs[j]}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" font-size="10" text-anchor="middle">{xlabel}</text>')
    parts.append(f'<text x="10" y="{top + ph / 2:.1f}" font-size="10" text-anchor="middle" '
                 f'transform="rotate(-90 10 {top + ph / 2:.1f})">{ylabel}</text>')
    # colour bar
    bx = left + pw + 8
    steps = 24
    for k in range(steps):
        y = top + ph - (k + 1) * ph / steps
        parts.append(f'<rect x="{bx}" y="{y:.2f}" width="10" height="{ph / steps + 0.3:.2f}" '
                     f'fill="{color_scale((k + 0.5) / steps)}"/>')
    for t in decade_ticks(lo, hi) if log else _ticks(lo, hi):
        y = top + ph - (t - lo) / (hi - lo) * ph
        parts.append(f'<line x1="{bx + 10}" x2="{bx + 13}" y1="{y:.1f}" y2="{y:.1f}" stroke="#444"/>'
                     f'<text x="{bx + 15}" y="{y + 3:.1f}" font-size="9">{decade_label(t) if log else fmt(t)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _ticks(lo: float, hi: float, n: int = 4) -> List[float]:
    if hi <= lo:
        return [lo]
    step = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(step))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= step), default=step)
    start = math.ceil(lo / step) * step
    out = []
    t = start
    while t <= hi + 1e-12 and len(out) < 12:
        out.append(t)
        t += step
    return out


def line_chart(series: Sequence[Tuple[str, Sequence[float], Sequence[float], str]], *, title: str,
               xlabel: str = "epoch", ylabel: str = "", log: bool = False, width: int = 400, height: int = 220,
               ylim: Optional[Tuple[float, float]] = None, legend: bool = True, dashed: Sequence[bool] = ()) -> str:
    """Lines ``(label, xs, ys, colour)`` on shared axes (log10 y when ``log``; non-finite or, on a
    log axis, non-positive points break the line)."""
    left, right, top, bottom = 48, 10, 22, 32
    longest = max((len(str(s[0])) for s in series), default=1)
    cols = max(1, min(3, int((width - left - right) // (5.5 * longest + 18))))
    legend_h = 14 * ((len(series) + cols - 1) // cols) if legend and series else 0
    height = height + legend_h
    pw, ph = width - left - right, height - top - bottom - legend_h
    xs_all = [float(x) for _, xs, _, _ in series for x in xs]
    tr = (lambda y: math.log10(y)) if log else (lambda y: float(y))
    ys_all = [tr(y) for _, _, ys, _ in series for y in ys
              if y is not None and math.isfinite(y) and (y > 0 or not log)]
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1
    if ylim is not None:
        y0, y1 = (tr(ylim[0]), tr(ylim[1]))
    elif ys_all:
        y0, y1 = min(ys_all), max(ys_all)
    else:
        y0, y1 = 0.0, 1.0
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - (y - y0) / (y1 - y0) * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" style="{FONT}" role="img">',
             f'<text x="{left}" y="14" font-size="12" font-weight="600">{_esc(title)}</text>',
             f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>']
    for t in decade_ticks(y0, y1) if log else _ticks(y0, y1):
        y = py(t)
        lab = decade_label(t) if log else fmt(t)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="9" text-anchor="end">{lab}</text>')
    for t in _ticks(x0, x1):
        x = px(t)
        parts.append(f'<text x="{x:.1f}" y="{top + ph + 11}" font-size="9" text-anchor="middle">{fmt(t)}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 24}" font-size="10" text-anchor="middle">{_esc(xlabel)}</text>')
    if ylabel:
        parts.append(f'<text x="10" y="{top + ph / 2:.1f}" font-size="10" text-anchor="middle" '
                     f'transform="rotate(-90 10 {top + ph / 2:.1f})">{_esc(ylabel)}</text>')
    for k, (label, xs, ys, color) in enumerate(series):
        segments: List[List[str]] = [[]]
        for x, y in zip(xs, ys):
            if y is None or not math.isfinite(y) or (log and y <= 0):
                if segments[-1]:
                    segments.append([])
                continue
            yy = min(max(tr(y), y0), y1)
            segments[-1].append(f"{px(float(x)):.1f},{py(yy):.1f}")
        dash = ' stroke-dasharray="5,3"' if k < len(dashed) and dashed[k] else ""
        for seg in segments:
            if len(seg) == 1:
                cx, cy = seg[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="2" fill="{color}"><title>{_esc(label)}</title></circle>')
            elif seg:
                parts.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{color}" stroke-width="1.6"{dash}>'
                             f'<title>{_esc(label)}</title></polyline>')
    if legend:
        for k, (label, _, _, color) in enumerate(series):
            lx = left + (k % cols) * (pw / cols)
            ly = top + ph + 36 + (k // cols) * 14
            parts.append(f'<rect x="{lx:.1f}" y="{ly - 8}" width="10" height="3" fill="{color}"/>'
                         f'<text x="{lx + 13:.1f}" y="{ly - 3}" font-size="9">{_esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
