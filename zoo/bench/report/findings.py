"""The papers' qualitative findings as data, decided on a suite's leaderboard cells.

Many of the papers' results are figures or sentences, not table numbers ("GATDB is able to
perfectly fit the data every time", "the Laplacian energy exhibits a consistent increase as
network depth grows").  A suite's reported-numbers file (``benchmarks/suites/reported/*.json``)
may carry a ``findings`` list beside its ``entries``; each finding quotes the paper and states a
machine-checkable comparison on the suite's leaderboard cells::

    {"id": "gat_beats_gatv2",                       # unique in the suite; notes name it
     "claim": "GAT outperforms GATv2 on the twin task, at every k",   # our one-line reading
     "source": "§4.5.2, Fig. 1",                     # where in the paper
     "quote": "The more surprising result is that GAT outperforms GATv2 on this task.",
     "check": {"kind": "greater", "a": {"model": "gat"}, "b": {"model": "gatv2"}, "over": "k"}}

Check vocabulary (``kind`` and its keys; every check may also have ``where``, ``over``, ``metric``):

* ``greater`` / ``less`` (``a``, ``b``): a's cell is above / below b's, per column value (and
  per table); a and b cells are paired when they agree on every row key neither names.  An
  optional ``margin`` (>= 0, in the metric's units) makes it "a is above b − margin" / "below
  b + margin": "within ``margin`` of b, or better" ("rival or outperform").
* ``at_least`` / ``at_most`` (``cells``, ``value``): each selected cell is >= / <= ``value``;
  with ``"runs": "each"`` every run of the cell must be ("every time"): *holds* when all are,
  *contradicted* when one is not (no CI involved).
* ``increasing`` / ``decreasing`` (``cells``): per row, each step to the next column value
  goes up / down (a ``greater`` / ``less`` between neighbours).
* ``bounded`` (``cells``, ``spread``): per row, max − min over the column values is at most
  ``spread`` (in decades for log-normal metrics such as energies).

A *selector* (``a``, ``b``, ``cells``) is ``{key: value or [values]}`` over cell keys (the
leaderboard's rows / columns / table_by and any other key the suite sets, as in ``zoo bench
--where``; plugin aliases allowed), or a list of such (their union).  ``where`` (a selector)
restricts every cell the check reads; ``over`` names the leaderboard's column key (optional,
checked); ``metric`` is the leaderboard metric (default) or ``"epochs_to_best"``, or a metric a mode
records beside the leaderboard's (:func:`other_split`): on a test-accuracy suite ``"train"`` / ``"val"``
(the same selected state's other splits) or ``"self_attention"`` (mode ``train_attention``), on an
effective-rank suite ``"equal_rows_distance"`` (mode ``rank_at_init``).

Sources: a ``quote`` is the paper's own text, verbatim modulo whitespace; a sentence
the text extraction splits is two excerpts joined by ``[...]`` (:func:`quote_in_text`).  A check
must hold on the paper's own stored numbers wherever it has them (the report shows that verdict
beside ours); both rules are tested on every shipped finding.

Verdict of one comparison, from each cell's mean and 95 % CI (:mod:`zoo.bench.analyze.stats`; energies
in log10, with the CI of the log-mean):

* ``holds (significant)`` — it holds for the whole CIs (intervals that do not overlap; a bound
  outside the CI);
* ``holds`` — the means satisfy it;
* ``contradicted`` — the opposite holds significantly (CIs on the wrong side, not overlapping);
* ``inconclusive`` — otherwise (e.g. means the wrong way but CIs overlapping; a cell with
  n = 1 has no CI, so it can hold but never significantly either way);
* ``not run`` — a cell it needs has no record.

A finding's verdict: ``not run`` if none of its comparisons ran; else ``contradicted`` if any
ran comparison is; ``holds (significant)`` if all ran comparisons are; ``holds`` if all hold;
else ``inconclusive``.  How many of its comparisons ran is stated beside it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo._names import close_matches, normalize_name
from zoo.bench.analyze import board as lb
from zoo.bench.analyze.stats import Summary
from zoo.bench.suite.cells import cell_value
from zoo.bench.suite.measures import MODE_SPECS, metric_spec
from zoo.bench.suite.plugins import canonical_name

HOLDS_SIG, HOLDS, INCONCLUSIVE, CONTRADICTED, NOT_RUN = (
    "holds (significant)", "holds", "inconclusive", "contradicted", "not run")
VERDICTS = (HOLDS_SIG, HOLDS, INCONCLUSIVE, CONTRADICTED, NOT_RUN)
FINDING_KEYS = ("id", "claim", "source", "quote", "check")
COMMON_KEYS = ("kind", "where", "over", "metric")
RUNS = ("mean", "each")  # at_least / at_most: the cell's mean (CI rules) or every run
#: kind -> its own required keys
KINDS: Dict[str, Tuple[str, ...]] = {
    "greater": ("a", "b"), "less": ("a", "b"),
    "at_least": ("cells", "value"), "at_most": ("cells", "value"),
    "increasing": ("cells",), "decreasing": ("cells",),
    "bounded": ("cells", "spread"),
}
EPOCHS = "epochs_to_best"
#: a test-accuracy suite records the training and validation accuracies of the same selected state:
#: a finding about them ("no degradation in training or validation accuracy") reads that split
OTHER_SPLITS = ("train", "val")
#: Metrics a finding may read on a test-accuracy board besides the other splits: recorded beside
#: the accuracy by a mode (``train_attention``'s ``self_attention``); cells without it are not run.
OTHER_METRICS = OTHER_SPLITS + ("self_attention",)
_EPS = 1e-9  # thresholds are rounded decimals: a value on the bound satisfies at_least / at_most


class FindingsError(ValueError):
    """A findings list that does not validate; the message names the finding and the fix."""


# --------------------------------------------------------------------------- the format


Selector = List[Dict[str, List[Any]]]  # a union of {key: allowed values}


@dataclass
class Finding:
    id: str
    claim: str
    source: str
    quote: str
    kind: str
    check: Dict[str, Any]  # as written (for display)
    selectors: Dict[str, Selector]  # "a" / "b" / "cells" -> canonical selectors
    where: Dict[str, List[Any]] = field(default_factory=dict)
    metric: Optional[str] = None  # None: the leaderboard metric
    value: Optional[float] = None  # at_least / at_most bound, bounded spread
    runs: str = "mean"  # at_least / at_most: "each" = every run must satisfy the bound
    margin: float = 0.0  # greater / less: compare a with b shifted by the margin toward a


def _near(word: str, choices: Sequence[str]) -> str:
    near = close_matches(word, choices)
    return f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""


def canonical_value(key: str, value: Any) -> Any:
    """Plugin / dataset aliases -> the canonical names that records store (``bal_x`` -> ``balanced_xavier``)."""
    if key in ("model", "init", "norm", "dataset") and isinstance(value, str):
        return canonical_name(key, value)
    return value


def value_key(v: Any) -> str:
    """A comparable form of a cell value (names normalised, 4.0 == 4)."""
    if isinstance(v, str):
        v = normalize_name(v)
    elif isinstance(v, float) and v.is_integer():
        v = int(v)
    return repr(v)


def _parse_selector(raw: Any, where: str, name: str) -> Selector:
    items = raw if isinstance(raw, list) else [raw]
    if not items or not all(isinstance(s, dict) for s in items):
        raise FindingsError(f"{where}: check.{name} must be a selector {{key: value or [values]}} or a list of them, "
                            f"e.g. {{\"model\": \"gat\"}}; got {raw!r}")
    out = []
    for s in items:
        sel = {}
        for k, v in s.items():
            vals = v if isinstance(v, list) else [v]
            if not vals:
                raise FindingsError(f"{where}: check.{name}.{k} is an empty list; give at least one value")
            try:
                sel[k] = [canonical_value(k, x) for x in vals]
            except ValueError as e:
                raise FindingsError(f"{where}: check.{name}.{k}: {e}") from None
        out.append(sel)
    return out


def parse_findings(raw: Any, origin: str) -> List[Finding]:
    """Validate the shape of a ``findings`` list (keys, kinds, types); ``origin`` names the file."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FindingsError(f"{origin}: 'findings' must be a list of objects")
    out: List[Finding] = []
    seen = set()
    for i, item in enumerate(raw, 1):
        named = isinstance(item, dict) and item.get("id")
        where = f"{origin} finding #{i}" + (f" ({item.get('id')!r})" if named else "")
        if not isinstance(item, dict):
            raise FindingsError(f"{where}: must be an object with keys {', '.join(FINDING_KEYS)}")
        unknown = [k for k in item if k not in FINDING_KEYS]
        if unknown:
            raise FindingsError(f"{where}: unknown key(s) "
                                + ", ".join(repr(k) + _near(k, FINDING_KEYS) for k in unknown)
                                + f". Valid keys: {', '.join(FINDING_KEYS)}.")
        for k in ("id", "claim", "source", "quote"):
            if not isinstance(item.get(k), str) or not item[k].strip():
                raise FindingsError(f"{where}: needs a non-empty string {k!r}")
        if item["id"] in seen:
            raise FindingsError(f"{where}: id {item['id']!r} is used twice in this file; ids are unique per suite")
        seen.add(item["id"])
        check = item.get("check")
        if not isinstance(check, dict):
            raise FindingsError(f"{where}: needs a 'check' object, e.g. {{\"kind\": \"greater\", \"a\": {{...}}, "
                                "\"b\": {...}}")
        kind = check.get("kind")
        if kind not in KINDS:
            raise FindingsError(f"{where}: unknown check kind {kind!r}" + (_near(kind, KINDS) if isinstance(kind, str)
                                                                             else "")
                                + f". Valid kinds: {', '.join(KINDS)} (zoo/bench/findings.py).")
        valid = (*COMMON_KEYS, *KINDS[kind], *(("runs",) if kind in ("at_least", "at_most") else ()),
                 *(("margin",) if kind in ("greater", "less") else ()))
        unknown = [k for k in check if k not in valid]
        if unknown:
            raise FindingsError(f"{where}: check kind {kind!r} has no key(s) "
                                + ", ".join(repr(k) + _near(k, valid) for k in unknown)
                                + f". Its keys: {', '.join(valid)}.")
        missing = [k for k in KINDS[kind] if k not in check]
        if missing:
            raise FindingsError(f"{where}: check kind {kind!r} needs {', '.join(map(repr, missing))}")
        selectors = {k: _parse_selector(check[k], where, k) for k in ("a", "b", "cells") if k in check}
        where_sel = _parse_selector(check.get("where", {}), where, "where")
        if len(where_sel) != 1:
            raise FindingsError(f"{where}: check.where must be one selector {{key: value or [values]}}, not a list")
        value = None
        margin = check.get("margin", 0.0)
        if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) or margin < 0:
            raise FindingsError(f"{where}: check.margin must be a finite number >= 0, got {margin!r}")
        for k in ("value", "spread"):
            if k in check:
                if isinstance(check[k], bool) or not isinstance(check[k], (int, float)) or not math.isfinite(check[k]):
                    raise FindingsError(f"{where}: check.{k} must be a finite number, got {check[k]!r}")
                if k == "spread" and check[k] < 0:
                    raise FindingsError(f"{where}: check.spread must be >= 0, got {check[k]!r}")
                value = float(check[k])
        metric = check.get("metric")
        if metric is not None and not isinstance(metric, str):
            raise FindingsError(f"{where}: check.metric must be a string (the leaderboard metric or {EPOCHS!r})")
        runs = check.get("runs", "mean")
        if runs not in RUNS:
            raise FindingsError(f"{where}: check.runs must be one of {', '.join(map(repr, RUNS))}, got {runs!r}")
        if runs == "each" and metric == EPOCHS:
            raise FindingsError(f"{where}: check.runs = 'each' reads the runs' metric values; not with {EPOCHS!r}")
        if "over" in check and not isinstance(check["over"], str):
            raise FindingsError(f"{where}: check.over must be the leaderboard's column key (a string)")
        out.append(Finding(item["id"], item["claim"].strip(), item["source"].strip(), item["quote"].strip(), kind,
                           check, selectors, where_sel[0], metric, value, runs, float(margin)))
    return out


# --------------------------------------------------------------------------- quotes

#: joins the excerpts of a quote that the text extraction splits (around a table, a page break)
QUOTE_GAP = "[...]"


def quote_excerpts(quote: str) -> List[str]:
    """A quote's excerpts, whitespace removed: each must occur in the paper's text as it is."""
    return ["".join(part.split()) for part in quote.split(QUOTE_GAP) if part.strip()]


def quote_in_text(quote: str, text: str) -> bool:
    """Whether every excerpt of ``quote`` occurs verbatim in ``text`` (whitespace ignored: the
    papers' text extraction breaks lines and spaces punctuation, as in "Bal_O , consistently")."""
    flat = "".join(text.split())
    excerpts = quote_excerpts(quote)
    return bool(excerpts) and all(e in flat for e in excerpts)


# --------------------------------------------------------------------------- cells


def entry_value(board: lb.Board, entry: lb.Entry, key: str) -> Any:
    """The value of cell key ``key`` of a leaderboard entry (its row / column / table, else its config)."""
    lay = board.layout
    if key in lay["rows"]:
        return entry.row[lay["rows"].index(key)]
    if key == lay["columns"]:
        return entry.column
    if lay.get("table_by") and key == lay["table_by"]:
        return entry.table
    return cell_value(entry.config or {}, key)


def skeleton(info: Mapping[str, Any]) -> lb.Board:
    """The leaderboard of a resolved suite with no runs: every cell, each with an empty summary."""
    recs = [{"id": c["id"], "config": c["config"], "metrics": {}} for c in info["cells"]]
    return lb.aggregate({**info, "reported": None}, recs)


def matches(board: lb.Board, e: lb.Entry, sel: Mapping[str, List[Any]]) -> bool:
    """Whether entry ``e`` has, for every key of ``sel``, one of its values (names normalised)."""
    return all(value_key(entry_value(board, e, k)) in {value_key(v) for v in vs} for k, vs in sel.items())


def _select(board: lb.Board, entries: Sequence[lb.Entry], selector: Selector) -> List[lb.Entry]:
    return [e for e in entries if any(matches(board, e, s) for s in selector)]


def validate(findings: Sequence[Finding], board: lb.Board, keys: Sequence[str], origin: str) -> None:
    """Check each finding against a suite's cells (``board``: its :func:`skeleton`; ``keys``: its
    cell keys): known keys and values (close matches named), selectors that match cells, and at
    least one comparison — so that a typo cannot silently leave a finding with nothing to decide."""
    lay = board.layout
    values: Dict[str, Dict[str, Any]] = {}

    def known(key: str) -> Dict[str, Any]:
        if key not in values:
            values[key] = {}
            for e in board.entries:
                v = entry_value(board, e, key)
                values[key].setdefault(value_key(v), v)
        return values[key]

    for f in findings:
        where = f"{origin} finding {f.id!r}"
        if not board.entries:
            raise FindingsError(f"{where}: suite {board.suite!r} has no leaderboard cells before it runs (metric "
                                f"{lay['metric']!r} takes its columns from the records); findings need fixed cells")
        if "over" in f.check and f.check["over"] != lay["columns"]:
            raise FindingsError(f"{where}: check.over is {f.check['over']!r} but the suite's leaderboard columns are "
                                f"{lay['columns']!r}; comparisons are made per {lay['columns']} value (drop 'over' "
                                "or name that key)")
        if f.metric not in (None, lay["metric"], EPOCHS) and not other_split(f, lay):
            beside = _beside(lay["metric"])
            raise FindingsError(f"{where}: check.metric {f.metric!r} is not this suite's metric; use "
                                f"{lay['metric']!r} (default) or {EPOCHS!r}"
                                + (f" or another recorded metric ({', '.join(beside)})" if beside else ""))
        for name, sels in [("where", [f.where]), *f.selectors.items()]:
            for sel in sels:
                for k, vs in sel.items():
                    if k not in keys:
                        raise FindingsError(f"{where}: check.{name} key {k!r} is not a cell key of suite "
                                            f"{board.suite!r}{_near(k, keys)}. Cell keys: {', '.join(keys)}.")
                    have = known(k)
                    for v in vs:
                        if value_key(v) not in have:
                            shown = sorted(map(str, have.values()))
                            raise FindingsError(f"{where}: check.{name}.{k} = {v!r} is not a value of any cell"
                                                f"{_near(str(v), shown)}. Values: {', '.join(shown)}.")
        pool = [e for e in board.entries if matches(board, e, f.where)]
        for name, sels in f.selectors.items():
            for sel in sels:
                if not any(matches(board, e, sel) for e in pool):
                    raise FindingsError(f"{where}: check.{name} {sel} matches no cell (with where = {f.where})")
        if not comparisons(f, board, {}):
            raise FindingsError(f"{where}: the check compares nothing: "
                                + ("no a and b cells share a table, column and the rows' other keys"
                                   if f.kind in ("greater", "less") else "each selected row needs two column values"
                                   if f.kind in ("increasing", "decreasing", "bounded") else "no cell selected"))


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Point:
    """A cell's number on the comparison scale (log10 for geometric summaries); lo/hi: its 95 % CI."""

    mean: float
    lo: Optional[float]
    hi: Optional[float]


def point(s: Summary) -> Optional[Point]:
    if s.mean is None:
        return None
    if s.kind == "geometric":
        m = math.log10(s.mean)
    else:
        m = s.mean
    if s.ci95 is None or not math.isfinite(s.ci95):
        return Point(m, None, None)
    return Point(m, m - s.ci95, m + s.ci95)


def shifted(p: Optional[Point], by: float) -> Optional[Point]:
    """``p`` moved by ``by`` (a finding's margin; on the comparison scale)."""
    if p is None or not by:
        return p
    return Point(p.mean + by, None if p.lo is None else p.lo + by, None if p.hi is None else p.hi + by)


def greater(a: Point, b: Point) -> str:
    """a > b: significant when the CIs do not overlap; contradicted when b's lies above a's."""
    if a.lo is not None and b.hi is not None and a.lo > b.hi:
        return HOLDS_SIG
    if b.lo is not None and a.hi is not None and b.lo > a.hi:
        return CONTRADICTED
    return HOLDS if a.mean > b.mean else INCONCLUSIVE


def at_least(x: Point, bound: float) -> str:
    tol = _EPS * max(1.0, abs(bound))
    if x.lo is not None and x.lo >= bound - tol:
        return HOLDS_SIG
    if x.hi is not None and x.hi < bound - tol:
        return CONTRADICTED
    return HOLDS if x.mean >= bound - tol else INCONCLUSIVE


def at_most(x: Point, bound: float) -> str:
    flip = lambda p: None if p is None else -p  # noqa: E731
    return at_least(Point(-x.mean, flip(x.hi), flip(x.lo)), -bound)


def bounded(xs: Sequence[Point], spread: float) -> str:
    """max − min of the means <= spread; significant when even the CIs' extremes are within it,
    contradicted when even their closest ends are further apart."""
    tol = _EPS * max(1.0, spread)
    if all(x.lo is not None for x in xs):
        if max(x.hi for x in xs) - min(x.lo for x in xs) <= spread + tol:
            return HOLDS_SIG
        if max(x.lo for x in xs) - min(x.hi for x in xs) > spread + tol:
            return CONTRADICTED
    return HOLDS if max(x.mean for x in xs) - min(x.mean for x in xs) <= spread + tol else INCONCLUSIVE


def combine(verdicts: Sequence[str]) -> str:
    ran = [v for v in verdicts if v != NOT_RUN]
    if not ran:
        return NOT_RUN
    if CONTRADICTED in ran:
        return CONTRADICTED
    if all(v == HOLDS_SIG for v in ran):
        return HOLDS_SIG
    return HOLDS if all(v in (HOLDS, HOLDS_SIG) for v in ran) else INCONCLUSIVE


# --------------------------------------------------------------------------- comparisons


@dataclass
class Comparison:
    label: str  # where: "k = 3", "dataset = cora, variant = san_pre_ln"
    text: str  # our numbers: "gat 62.00 ± 2.10 (5) vs gatv2 55.00 ± 3.00 (5)"
    verdict: str


Numbers = Mapping[Tuple[Any, Tuple[Any, ...], Any], lb.Entry]


def _summary(f: Finding, e: Optional[lb.Entry]) -> Optional[Summary]:
    if e is None:
        return None
    return e.epochs if f.metric == EPOCHS else e.summary


def _fmt(s: Optional[Summary]) -> str:
    return "not run" if s is None or s.mean is None else lb.fmt(s)


def _fmt_paper(s: Optional[Summary]) -> str:
    """A paper number as stored (no run count: the papers rarely give it)."""
    if s is None or s.mean is None:
        return "not stored"
    if s.kind == "geometric":
        return f"{s.mean:.2e}"
    return f"{s.mean:.2f}" + (f" ± {s.ci95:.2f}" if s.ci95 is not None else "")


def _row_label(board: lb.Board, e: lb.Entry) -> str:
    return "/".join(map(str, e.row))


def _place(board: lb.Board, e: lb.Entry, column: bool = True) -> str:
    lay = board.layout
    tables = lay.get("table_by") and len({x.table for x in board.entries}) > 1  # one table: no need to name it
    parts = [f"{lay['table_by']} = {e.table}"] if tables else []
    if column and not (tables and lay["columns"] == lay["table_by"]):  # a table per dataset, a column per dataset
        parts.append(f"{lay['columns']} = {e.column}")
    return ", ".join(parts)


def comparisons(f: Finding, board: lb.Board, numbers: Numbers, paper: bool = False) -> List[Comparison]:
    """The comparisons of ``f`` over the cells of ``board`` (a :func:`skeleton`), with the
    numbers of ``numbers`` (``{(table, row, column): Entry}``; missing: not run; ``paper``:
    they are the paper's numbers, shown as stored)."""
    pool = [e for e in board.entries if matches(board, e, f.where)]
    log = lb.is_log_metric(board) and f.metric != EPOCHS

    def ours(e: lb.Entry) -> Tuple[Optional[Point], str]:
        s = _summary(f, numbers.get((e.table, e.row, e.column)))
        p = None if s is None else point(s)
        return p, (_fmt_paper if paper else _fmt)(s)

    out: List[Comparison] = []
    if f.kind in ("greater", "less"):
        # pair a and b cells that agree on every row key that neither a nor b names (``where`` only restricts)
        named = {k for sels in (f.selectors["a"], f.selectors["b"]) for s in sels for k in s}
        free = [i for i, k in enumerate(board.layout["rows"]) if k not in named]
        a_cells, b_cells = _select(board, pool, f.selectors["a"]), _select(board, pool, f.selectors["b"])
        for a in a_cells:
            for b in b_cells:
                if a is b or (a.table, a.column) != (b.table, b.column) or any(a.row[i] != b.row[i] for i in free):
                    continue
                pa, ta = ours(a)
                pb, tb = ours(b)
                pb = shifted(pb, -f.margin if f.kind == "greater" else f.margin)
                verdict = NOT_RUN if pa is None or pb is None else greater(pa, pb) if f.kind == "greater" \
                    else greater(pb, pa)
                sign = ">" if f.kind == "greater" else "<"
                margin = "" if not f.margin else f" {'−' if f.kind == 'greater' else '+'} {f.margin:g}"
                text = f"{_row_label(board, a)} {ta} {sign} {_row_label(board, b)} {tb}{margin}"
                out.append(Comparison(_place(board, a), text, verdict))
        return out
    cells = _select(board, pool, f.selectors["cells"])
    if f.kind in ("at_least", "at_most"):
        bound = f.value if not log else (math.log10(f.value) if f.value and f.value > 0 else -math.inf)
        test: Callable[[Point, float], str] = at_least if f.kind == "at_least" else at_most
        sign = "≥" if f.kind == "at_least" else "≤"
        for e in cells:
            p, t = ours(e)
            verdict = NOT_RUN if p is None else test(p, bound)
            if f.runs == "each" and p is not None:
                got = numbers[(e.table, e.row, e.column)]
                runs = [v for v in got.values if v is not None and math.isfinite(v)] or [got.summary.mean]
                worst = min(runs) if f.kind == "at_least" else max(runs)
                ok = worst >= f.value - _EPS * max(1.0, abs(f.value)) if f.kind == "at_least" \
                    else worst <= f.value + _EPS * max(1.0, abs(f.value))
                verdict = HOLDS if ok else CONTRADICTED
                t += f", {'min' if f.kind == 'at_least' else 'max'} over runs {worst:.{'2e' if log else '2f'}}"
            out.append(Comparison(_place(board, e), f"{_row_label(board, e)} {t} {sign} {f.check['value']}", verdict))
        return out
    rows: Dict[Tuple[Any, Tuple[Any, ...]], List[lb.Entry]] = {}
    for e in cells:
        rows.setdefault((e.table, e.row), []).append(e)
    for (_, _), es in rows.items():
        es = sorted(es, key=lambda e: lb.sort_key(e.column))
        if len(es) < 2:
            continue
        col = board.layout["columns"]
        head = ", ".join(x for x in (_place(board, es[0], column=False), _row_label(board, es[0])) if x)
        if f.kind == "bounded":
            pts = [ours(e) for e in es]
            ran = [(e, p, t) for e, (p, t) in zip(es, pts) if p is not None]
            text = "; ".join(f"{col} {e.column}: {t}" for e, (_, t) in zip(es, pts))
            if len(ran) < 2:
                out.append(Comparison(head, text, NOT_RUN))
                continue
            means = [p.mean for _, p, _ in ran]
            unit = " decades" if log else ""
            text += f"; spread of the means {max(means) - min(means):.2f}{unit} (bound {f.value:g}{unit})"
            out.append(Comparison(head, text, bounded([p for _, p, _ in ran], f.value)))
            continue
        for lo, hi in zip(es, es[1:]):
            (p0, t0), (p1, t1) = ours(lo), ours(hi)
            verdict = NOT_RUN if p0 is None or p1 is None else greater(p1, p0) if f.kind == "increasing" \
                else greater(p0, p1)
            out.append(Comparison(f"{head}: {col} {lo.column} → {hi.column}", f"{t0} → {t1}", verdict))
    return out


def describe(f: Finding, board_layout: Mapping[str, Any]) -> str:
    """The check in words: ``test of {model = gat} > {model = gatv2}, per k``."""
    def sel(s: Selector) -> str:
        parts = [", ".join(f"{k} = {v[0] if len(v) == 1 else '/'.join(map(str, v))}" for k, v in d.items()) or "all"
                 for d in s]
        return " or ".join(f"{{{p}}}" for p in parts)

    metric = f.metric or board_layout.get("metric", "metric")
    col = board_layout.get("columns", "column")
    if f.kind in ("greater", "less"):
        margin = "" if not f.margin else f" {'−' if f.kind == 'greater' else '+'} {f.margin:g}"
        text = f"{metric} of {sel(f.selectors['a'])} {'>' if f.kind == 'greater' else '<'} {sel(f.selectors['b'])}" \
               f"{margin}, per {col}"
    elif f.kind in ("at_least", "at_most"):
        sign = "≥" if f.kind == "at_least" else "≤"
        text = f"{metric} of {sel(f.selectors['cells'])} {sign} {f.check['value']}" \
               + (" in every run" if f.runs == "each" else "") + f", each {col}"
    elif f.kind == "bounded":
        unit = " decades" if metric != EPOCHS and metric_spec(metric).geometric else ""
        text = f"{metric} of {sel(f.selectors['cells'])} spans at most {f.check['spread']}{unit} over {col}"
    else:
        text = f"{metric} of {sel(f.selectors['cells'])} {'rises' if f.kind == 'increasing' else 'falls'} " \
               f"at each step of {col}"
    if f.where:
        text += f", where {sel([f.where])[1:-1]}"
    return text


@dataclass
class Result:
    finding: Finding
    verdict: str
    comparisons: List[Comparison]
    paper: Optional[str] = None  # the verdict on the paper's own numbers (None: it stores none for these cells)
    paper_comparisons: List[Comparison] = field(default_factory=list)
    note: Any = None  # a zoo.bench.report.notes.Note (finding = id)

    @property
    def ran(self) -> int:
        return sum(c.verdict != NOT_RUN for c in self.comparisons)

    @property
    def paper_ran(self) -> int:
        return sum(c.verdict != NOT_RUN for c in self.paper_comparisons)


def other_split(f: Finding, layout: Mapping[str, Any]) -> bool:
    """Whether ``f`` reads another recorded metric than the board's (``metric = "val"`` or
    ``"self_attention"`` on a test board; on the board of a mode that measures without training,
    another of its measures: ``"equal_rows_distance"`` beside ``"effective_rank"``)."""
    board = layout.get("metric")
    if f.metric in OTHER_METRICS and board == "test":
        return True
    return f.metric not in (None, board) and any(not m.trains and {board, f.metric} <= set(m.metrics)
                                                 for m in MODE_SPECS.values())


def _beside(board_metric: str) -> List[str]:
    """The metrics a finding may read on a board of ``board_metric`` besides it (:func:`other_split`)."""
    if board_metric == "test":
        return list(OTHER_METRICS)
    return sorted({m for spec in MODE_SPECS.values() if not spec.trains and board_metric in spec.metrics
                   for m in spec.metrics} - {board_metric})


def with_metric(board: lb.Board, metric: str) -> lb.Board:
    """``board``'s cells read as another recorded metric (for the paper's numbers of that metric)."""
    return dataclasses.replace(board, layout={**board.layout, "metric": metric})


def paper_numbers(board: lb.Board, reported: Optional[Mapping[str, Any]]) -> Dict[Tuple[Any, Any, Any], lb.Entry]:
    """The paper's stored numbers as leaderboard entries on ``board``'s cells (mean = the value,
    its 95 % CI where stored; energies as one geometric value): to run a finding on the paper's own data."""
    out = {}
    for e in board.entries:
        rep = lb.find_reported(dict(reported) if reported else None, e.config or {}, board.layout, e.column)
        if rep is None:
            continue
        v = float(rep["value"])
        if lb.is_log_metric(board):
            s = Summary(1, v, None, None, kind="geometric", low=v, high=v, median=v)
        else:
            ci = rep.get("ci95")
            s = Summary(1, v, None, None if ci is None else float(ci))
        out[(e.table, e.row, e.column)] = lb.Entry(e.table, e.row, e.column, s, s, 0, rep, e.config)
    return out


def evaluate(findings: Sequence[Finding], board: lb.Board, numbers: Numbers,
             reported: Optional[Mapping[str, Any]] = None, paper_board: Optional[lb.Board] = None,
             split_numbers: Optional[Mapping[str, Numbers]] = None) -> List[Result]:
    """Each finding's verdict on ``numbers`` over the cells of ``board`` (a :func:`skeleton`), and
    on the paper's own numbers where ``reported`` stores them for the cells it compares (over the
    cells of ``paper_board``, default ``board``: the full suite where the records cover a slice).
    A finding about another split (:func:`other_split`) reads ``split_numbers[its metric]``
    (missing: not run) and the paper's numbers of that metric."""
    paper_board = paper_board or board
    paper = paper_numbers(paper_board, reported) if reported else {}
    out = []
    for f in findings:
        split = other_split(f, board.layout)
        cells = with_metric(board, f.metric) if split else board
        comps = comparisons(f, cells, (split_numbers or {}).get(f.metric, {}) if split else numbers)
        res = Result(f, combine([c.verdict for c in comps]), comps)
        own = paper_numbers(with_metric(paper_board, f.metric), reported) if split and reported else paper
        if own and f.metric != EPOCHS:
            res.paper_comparisons = [c for c in comparisons(f, with_metric(paper_board, f.metric) if split
                                                            else paper_board, own, paper=True)
                                     if c.verdict != NOT_RUN]
            res.paper = combine([c.verdict for c in res.paper_comparisons]) if res.paper_comparisons else None
        out.append(res)
    return out
