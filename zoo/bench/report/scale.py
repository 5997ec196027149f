"""The *Scale* line of a suite on the reproduction page: which part of the suite its records cover,
and at which protocol (the suite's full one, its quick form, or reduced with ``zoo bench --set``)."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from zoo.bench.analyze import board as lb
from zoo.bench.analyze.best_point import search_axes
from zoo.bench.report import findings as fd
from zoo.bench.suite.cells import cell_value
from zoo.bench.suite.measures import metric_spec
from zoo.bench.suite.settings import describe_settings


def _fmt_values(values: List[Any]) -> str:
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if ints and len(values) > 2 and values == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}–{values[-1]}"
    return ", ".join(map(str, values))


def describe_scale(info: Dict[str, Any], recs: Sequence[Dict[str, Any]]) -> str:
    """Which part of the suite the records cover, exactly: per shape key the values run out of
    the suite's, the number of runs, and the protocol (the suite's full one, its quick form, or
    reduced with ``zoo bench --set``: each set value beside the suite's)."""
    if not recs:
        return f"**no runs yet** — none of the {'--quick form' if info.get('quick') else 'suite'}'s " \
               f"{len(info['cells'])} runs is recorded."
    lay = info["leaderboard"]
    keys = [k for k in (lay.get("table_by"), *lay["rows"], lay["columns"] if not metric_spec(lay["metric"]).per_layer else None,
                        *((info.get("selection") or {}).get("where") or {}), *search_axes(info), "seed") if k]
    keys = list(dict.fromkeys(keys))
    parts = []
    full_scale = len(recs) == len(info["cells"])
    for key in keys:
        suite_vals: Dict[str, Any] = {}
        for c in info["cells"]:
            v = cell_value(c["config"], key)
            suite_vals.setdefault(fd.value_key(v), v)
        ran = {fd.value_key(cell_value(r["config"], key)) for r in recs}
        if len(suite_vals) < 2 and key != "seed":
            continue
        order = sorted(suite_vals, key=lambda k: lb.sort_key(suite_vals[k]))
        covered = [suite_vals[k] for k in order if k in ran]
        if len(covered) == len(order):
            parts.append(f"{key} all {len(order)} ({_fmt_values(covered)})" if key == "seed" or len(order) <= 8
                         else f"{key} all {len(order)}")
        else:
            parts.append(f"{key} {_fmt_values(covered)} ({len(covered)} of {len(order)}: "
                         f"{_fmt_values([suite_vals[k] for k in order])})")
    epochs = sorted({r["config"]["train"]["epochs"] for r in recs})
    reduced = describe_settings(info)
    epochs_text = "" if "epochs" in (info.get("set") or {}) else f"epochs {_fmt_values(epochs)}, "
    if info.get("quick"):
        protocol = f"the suite's --quick form (epochs {_fmt_values(epochs)}): not the paper's protocol"
        if reduced:
            protocol = f"the suite's --quick form, reduced with --set {reduced} (epochs {_fmt_values(epochs)}): " \
                       "not the paper's protocol"
    elif reduced:
        protocol = f"reduced with --set {reduced}; {epochs_text}everything else as in the suite file"
    else:
        protocol = f"the suite's full protocol (epochs {_fmt_values(epochs)}, stop and selection as in the suite file)"
    if info.get("quick"):
        head = f"**quick form** — {len(recs)} of the --quick form's {len(info['cells'])} runs (not the paper's scale)"
    elif reduced:
        runs = f"all {len(info['cells'])}" if full_scale else f"{len(recs)} of the suite's {len(info['cells'])}"
        head = f"**stated-reduced** — {runs} runs, at a reduced protocol (zoo bench --set)"
    elif full_scale:
        head = f"**full** — all {len(info['cells'])} runs"
    else:
        head = f"**stated-reduced** — {len(recs)} of the suite's {len(info['cells'])} runs"
    return f"{head}; {'; '.join(parts)}. Protocol: {protocol}."
