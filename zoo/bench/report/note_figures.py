"""Figures in the report's notes, bound to the records so that a note cannot drift from them.

A note quotes our numbers through placeholders, filled from the records each time the page is
made::

    note = "Ours {{ours}} vs the paper's {{paper}}; Wisconsin {{ours: dataset = wisconsin_npz}} ({{seeds}})"

``{{FIELD}}`` reads the one cell the note's ``when`` selects (a protocol field: every cell it
selects, each value once); ``{{FIELD: key = value, ...}}`` adds or replaces keys of that selector
(values as in ``when``: plugin aliases allowed).  Two more keys: ``seeds = 0-2`` restricts the
cell to those runs (a figure of its history: "at three seeds ..."), ``metric = val`` reads the
same runs' other recorded metric.  A selector that matches no cell or several is an error naming
them.  Fields (:data:`FIELDS`): ``ours`` (the cell as the table prints it), ``mean_ci`` (the same
without the run count), ``mean``, ``n``, ``seeds``, ``values`` (per run, in seed order),
``best_epochs`` (the range of the runs' best epochs), ``paper`` (with its stored ±), ``delta``,
``interval`` (the 95 % interval of ours − paper), ``status`` (the report's), and the protocol the
records ran: ``optimizer``, ``lr``, ``epochs``, ``loss_threshold``.

Figures written out instead are checked against the records (:func:`drift`): a ``mean ± ci``
that equals a cell's summary restates the records (write a placeholder), one that equals the
summary of a cell's first k runs only is stale (the cell has more runs now); ``SGD lr X`` /
``Adam lr X``, ``up to N epochs`` and ``stop at training loss X`` / ``loss stop of X`` that no
cell the note covers ran are wrong; a list of per-run values (``77.4 / 76.9 / 78.1``) that equals a
cell's runs restates them, and one that is its first runs while it has more now is stale.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.analyze import board as lb
from zoo.bench.report import findings as fd
from zoo.bench.analyze.stats import summarize, summarize_log
from zoo.bench.suite.measures import METRIC_SPECS

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*(?::([^{}]*))?\}\}")
FIELDS = ("ours", "mean_ci", "mean", "n", "seeds", "values", "best_epochs", "paper", "delta", "interval", "status", "optimizer", "lr",
          "epochs", "loss_threshold")
#: fields the report decides (the comparison with the paper), not the records alone
DECIDED = ("interval", "status")
PROTOCOL_FIELDS = ("optimizer", "lr", "epochs", "loss_threshold")
_PLUS_MINUS = re.compile(r"(?<![\d.])(\d+\.\d+) ± (\d+\.\d+)(?![\d.])")
#: per-run values written out, ``77.4 / 76.9 / 78.1`` (three or more)
_VALUE_LIST = re.compile(r"(?<![\d.])\d+\.\d+(?: / \d+\.\d+){2,}(?![\d.])")
_NUMBER = r"(\d+(?:\.\d+)?(?:e-?\d+)?)"
#: protocol figures a note may quote: (pattern, config key of ``train``, optimizer it names or None)
_PROTOCOL = [
    (re.compile(r"\bSGD,? (?:lr|learning rate) " + _NUMBER), "lr", "sgd"),
    (re.compile(r"\bAdam,? (?:lr|learning rate) " + _NUMBER), "lr", "adam"),
    (re.compile(r"\bup to " + _NUMBER + r" epochs"), "epochs", None),
    (re.compile(r"\b(?:loss stop (?:of|at) |stop at train(?:ing)? loss )" + _NUMBER), "loss_threshold", None),
]


class NoteFigureError(ValueError):
    """A placeholder that names no field, or selects no cell / several cells."""


def _selector(raw: str, base: Mapping[str, List[Any]], where: str) -> Dict[str, List[Any]]:
    sel = {k: list(v) for k, v in base.items()}
    for part in filter(None, (p.strip() for p in (raw or "").split(","))):
        if "=" not in part:
            raise NoteFigureError(f"{where}: '{part}' in a placeholder is not key = value")
        key, value = (x.strip() for x in part.split("=", 1))
        value = value.strip('"').strip("'")
        if key in ("seeds", "metric"):
            sel[key] = [value]
            continue
        parsed: Any = value
        for cast in (int, float):
            try:
                parsed = cast(value)
                break
            except ValueError:
                continue
        try:
            sel[key] = [fd.canonical_value(key, parsed)]
        except ValueError as e:
            raise NoteFigureError(f"{where}: {e}") from None
    return sel


def _seed_list(raw: Any, where: str) -> List[int]:
    text = str(raw).replace("–", "-")
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return list(range(lo, hi + 1))
        return [int(x) for x in text.replace("/", " ").split()]
    except ValueError:
        raise NoteFigureError(f"{where}: seeds = {raw!r} in a placeholder: write a range (0-2) or seeds (0 3 4)") from None


def _runs_of(board: lb.Board, e: lb.Entry, seeds: Sequence[int], where: str) -> lb.Entry:
    """Cell ``e`` restricted to the runs of ``seeds`` (a figure of its history, bound to the records)."""
    keep = [(r, v) for r, v in zip(e.records, e.values) if int(r["config"]["run"]["seed"]) in seeds]
    missing = sorted(set(seeds) - {int(r["config"]["run"]["seed"]) for r, _ in keep})
    if missing:
        raise NoteFigureError(f"{where}: {_place(e)} has no run of seed(s) {missing}")
    values = [v for _, v in keep]
    stat = summarize_log if lb.is_log_metric(board) else summarize
    return dataclasses.replace(e, summary=stat(values), values=values, records=[r for r, _ in keep])


def _other_metric(board: lb.Board, e: lb.Entry, metric: str, where: str) -> lb.Entry:
    """Cell ``e`` read as another metric its records hold (``metric = val``: the same runs' validation accuracy)."""
    if metric not in METRIC_SPECS or METRIC_SPECS[metric].per_layer:
        raise NoteFigureError(f"{where}: metric = {metric!r} in a placeholder: not a per-run metric "
                              f"({', '.join(k for k, m in METRIC_SPECS.items() if not m.per_layer)})")
    spec = METRIC_SPECS[metric]
    scale = float(board.layout.get("scale", 100.0)) if spec.percent else 1.0
    values = [None if r["metrics"].get(metric) is None else float(r["metrics"][metric]) * scale for r in e.records]
    stat = summarize_log if spec.geometric else summarize
    return dataclasses.replace(e, summary=stat(values), values=values, reported=None)


def _one_cell(board: lb.Board, sel: Mapping[str, List[Any]], where: str) -> lb.Entry:
    sel = dict(sel)
    seeds, metric = sel.pop("seeds", None), sel.pop("metric", None)
    e = _the_cell(board, sel, where)
    if metric is not None:
        e = _other_metric(board, e, str(metric[0]), where)
    return e if seeds is None else _runs_of(board, e, _seed_list(seeds[0], where), where)


def _the_cell(board: lb.Board, sel: Mapping[str, List[Any]], where: str) -> lb.Entry:
    found = [e for e in board.entries if fd.matches(board, e, sel)]
    if len(found) != 1:
        shown = "; ".join(f"{e.table} {'/'.join(map(str, e.row))} {e.column}" for e in found[:5])
        raise NoteFigureError(f"{where}: the placeholder's cell selector {dict(sel)} matches {len(found)} cells of "
                              f"{board.suite!r}" + (f" ({shown})" if found else "")
                              + "; name the keys that tell one cell apart, e.g. {{ours: num_layers = 5}}")
    return found[0]


def _seeds(e: lb.Entry) -> str:
    seeds = sorted(int(r["config"]["run"]["seed"]) for r in e.records)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _in_seed_order(e: lb.Entry) -> List[Optional[float]]:
    pairs = sorted(zip((int(r["config"]["run"]["seed"]) for r in e.records), e.values), key=lambda p: p[0])
    return [v for _, v in pairs]


def _protocol(e: lb.Entry, key: str) -> str:
    values = sorted({repr((e.config or {}).get("train", {}).get(key))} |
                    {repr(r["config"]["train"].get(key)) for r in e.records})
    return " / ".join(v.strip("'") for v in values)


def field_value(board: lb.Board, e: lb.Entry, name: str, decided: Callable[[lb.Entry, str], str]) -> str:
    """The text of one placeholder field for cell ``e`` (``decided(e, field)``: the report's status and
    Δ interval of a cell)."""
    geometric = lb.is_log_metric(board)
    if name == "ours":
        return lb.fmt(e.summary)
    if name == "mean_ci":
        return lb.fmt(e.summary).rsplit(" (", 1)[0]
    if name == "mean":
        return "–" if e.summary.mean is None else (f"{e.summary.mean:.2e}" if geometric else f"{e.summary.mean:.2f}")
    if name == "n":
        return str(e.summary.n)
    if name == "seeds":
        return _seeds(e)
    if name == "values":
        return " / ".join("–" if v is None else (f"{v:.2e}" if geometric else f"{v:.1f}") for v in _in_seed_order(e))
    if name == "best_epochs":
        epochs = sorted(int(r["epochs_to_best"]) for r in e.records if r.get("epochs_to_best") is not None)
        return "–" if not epochs else f"{epochs[0]}" if epochs[0] == epochs[-1] else f"{epochs[0]}–{epochs[-1]}"
    if name in ("paper", "delta", *DECIDED) and e.reported is None:
        raise NoteFigureError(f"cell {e.table} {'/'.join(map(str, e.row))} {e.column} has no paper number "
                              f"for {{{{{name}}}}}")
    if name == "paper":
        spread = next((k for k in ("ci95", "std", "spread") if e.reported.get(k) is not None), None)
        return lb.fmt_paper(board, e.reported["value"]) + (f" ± {float(e.reported[spread]):.2f}" if spread else "")
    if name == "delta":
        return lb.fmt_diff(board, e.diff)
    if name in DECIDED:
        return decided(e, name)
    return _protocol(e, name)


def fill(text: str, board: Optional[lb.Board], base: Mapping[str, List[Any]], where: str,
         decided: Callable[[lb.Entry, str], str]) -> str:
    """``text`` with every placeholder replaced from ``board`` (the cells of the note's suite)."""
    def one(m: "re.Match[str]") -> str:
        name = m.group(1)
        if name not in FIELDS:
            raise NoteFigureError(f"{where}: unknown placeholder field {name!r}; fields: {', '.join(FIELDS)}")
        if board is None:
            raise NoteFigureError(f"{where}: placeholder {m.group(0)} but the suite has no records to fill it from")
        sel = _selector(m.group(2) or "", base, where)
        if name in PROTOCOL_FIELDS:  # a protocol may be shared by many cells: their values, once each
            cells = [e for e in board.entries if fd.matches(board, e, sel)] or [_the_cell(board, sel, where)]
            return " / ".join(dict.fromkeys(v for e in cells for v in _protocol(e, name).split(" / ")))
        cell = _one_cell(board, sel, where)
        if name in DECIDED and (sel.get("seeds") or sel.get("metric")):
            raise NoteFigureError(f"{where}: {{{{{name}}}}} is the report's decision on the cell's own runs; "
                                  "not with seeds = or metric =")
        return field_value(board, cell, name, decided)
    return PLACEHOLDER.sub(one, text)


# --------------------------------------------------------------------------- figures written out


def _close(quoted: str, value: Optional[float]) -> bool:
    if value is None or not math.isfinite(value):
        return False
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    return abs(float(quoted) - value) <= 0.5 * 10 ** -decimals + 1e-9


def _prefix_summaries(e: lb.Entry) -> Iterable[Tuple[int, Any]]:
    """``(k, summary of the first k runs in seed order)`` for k = 2 .. n."""
    values = [v for v in _in_seed_order(e) if v is not None and math.isfinite(v)]
    for k in range(2, len(values) + 1):
        yield k, summarize(values[:k])


def _place(e: lb.Entry) -> str:
    return f"{e.table} {'/'.join(map(str, e.row))} L/col {e.column}"


def drift(text: str, board: lb.Board, covered: Sequence[lb.Entry], where: str) -> List[str]:
    """Problems with the figures a note writes out instead of placeholders (module docstring)."""
    problems: List[str] = []
    plain = PLACEHOLDER.sub("", text)
    if not lb.is_log_metric(board):
        for m in _PLUS_MINUS.finditer(plain):
            problems += _check_summary(m.group(1), m.group(2), board, where)
        for m in _VALUE_LIST.finditer(plain):
            problems += _check_values(m.group(0).split(" / "), board, where)
    for pattern, key, optimizer in _PROTOCOL:
        cells = [e for e in covered if optimizer is None or
                 str((e.config or {}).get("train", {}).get("optimizer")) == optimizer]
        if not cells:
            continue  # the note names another protocol than its cells' (e.g. a probe's)
        ran = {float(v) for e in cells for v in _protocol(e, key).split(" / ") if _is_number(v)}
        for m in pattern.finditer(plain):
            if ran and not any(math.isclose(float(m.group(1)), v, rel_tol=1e-9) for v in ran):
                shown = ", ".join(f"{v:g}" for v in sorted(ran))
                problems.append(f"{where}: '{m.group(0)}' but its cells ran {key} {shown}; write {{{{{key}}}}}")
    return problems


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def _check_values(quoted: Sequence[str], board: lb.Board, where: str) -> List[str]:
    """A list of per-run values that is a cell's runs in seed order restates the records; one that is
    its first runs while the cell has more runs now is a figure of its history written as if current."""
    for e in board.entries:
        values = [v for v in _in_seed_order(e) if v is not None and math.isfinite(v)]
        if len(values) < len(quoted) or not all(_close(q, v) for q, v in zip(quoted, values)):
            continue
        if len(values) == len(quoted):
            return [f"{where}: '{' / '.join(quoted)}' restates the records of {_place(e)}; write "
                    f"{{{{values: ...}}}} (a placeholder is filled from the records, so it cannot drift)"]
        return [f"{where}: '{' / '.join(quoted)}' are {_place(e)}'s first {len(quoted)} runs; it has "
                f"{len(values)} now (stale figure; write {{{{values: ...}}}}, or {{{{values: seeds = ...}}}} "
                "for a figure of its history)"]
    return []


def _check_summary(mean: str, ci: str, board: lb.Board, where: str) -> List[str]:
    for e in board.entries:
        s = e.summary
        if s.n >= 2 and _close(mean, s.mean) and _close(ci, s.ci95):
            return [f"{where}: '{mean} ± {ci}' restates the records of {_place(e)}; write {{{{ours: ...}}}} "
                    "(a placeholder is filled from the records, so it cannot drift)"]
    for e in board.entries:
        for k, s in _prefix_summaries(e):
            if k < e.summary.n and _close(mean, s.mean) and _close(ci, s.ci95):
                return [f"{where}: '{mean} ± {ci}' is {_place(e)} over its first {k} runs; it has "
                        f"{e.summary.n} now: {lb.fmt(e.summary)} (stale figure; write {{{{ours: ...}}}})"]
    return []
