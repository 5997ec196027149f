"""Which of a suite's cells are the paper text's reading, where several cells carry one paper number.

A paper number may attach to several cells of a suite: the nonlocal paper's Table 6 is one model,
but ``nonlocal_energy`` runs four readings of its energy factor (``san_nonlocal`` = §4.1's 1/n,
``_nd``, ``_none``, ``_mu``), and each matches the table's ``model = san_nonlocal`` entries.  A
status for each would count one paper number four times, and a reading the text does not give
could "reproduce" it.  The suite's reported-numbers file therefore declares the text's reading::

    "readings": {"key": "variant",
                 "text": ["san_pre_ln", "san_post_ln", "san_nonlocal"],
                 "source": "§4.1: the energy of each head with the factor 1/n; the others are our alternatives"}

A cell with a paper number whose ``key`` value is not in ``text`` is an *alternative reading*: the
report shows the paper's number and the difference beside it, but gives it no status and counts
it in no status column (``zoo.bench.report.status``).  Without ``readings`` every cell is the text's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from zoo._names import normalize_name
from zoo.bench.analyze import board as lb
from zoo.bench.report.missing_cost import entry_matches
from zoo.bench.suite.cells import cell_value

READINGS_KEYS = ("key", "text", "source")


class ReadingsError(ValueError):
    """A ``readings`` declaration that does not validate; the message names the file and the fix."""


def _value_key(v: Any) -> str:
    if isinstance(v, str):
        return normalize_name(v)
    if isinstance(v, float) and v.is_integer():
        return repr(int(v))
    return repr(v)


@dataclass(frozen=True)
class Readings:
    """The cell key that tells readings apart, the values that are the text's, and why."""

    key: str
    text: Tuple[Any, ...]
    source: str

    def is_text(self, value: Any) -> bool:
        """Whether a cell whose ``key`` has ``value`` is the text's reading."""
        return _value_key(value) in {_value_key(v) for v in self.text}

    def explanation(self, value: Any) -> str:
        """The line shown beside an alternative reading's cell (the source is in :meth:`summary`, once per suite)."""
        return (f"alternative reading ({self.key} = {value}), not counted: the text's reading is "
                f"{self.key} = {' / '.join(map(str, self.text))} (why: the suite's readings line above)")

    def summary(self) -> str:
        """The suite's readings line: which cells are the text's, and the source, stated once."""
        return (f"Readings: the text's reading is {self.key} = {' / '.join(map(str, self.text))}; a cell of another "
                f"{self.key} beside a paper number is an alternative reading, shown with its Δ and not counted "
                f"({self.source}).")


def parse_readings(raw: Any, origin: str) -> Optional[Readings]:
    """Validate a reported file's ``readings`` object (``None``: no declaration)."""
    if raw is None:
        return None
    example = '{"key": "variant", "text": ["san_nonlocal"], "source": "§4.1 ..."}'
    if not isinstance(raw, Mapping):
        raise ReadingsError(f"{origin}: 'readings' must be an object like {example}")
    unknown = [k for k in raw if k not in READINGS_KEYS]
    missing = [k for k in READINGS_KEYS if k not in raw]
    if unknown or missing:
        raise ReadingsError(f"{origin}: 'readings' needs exactly the keys {', '.join(READINGS_KEYS)}"
                            + (f"; unknown: {', '.join(map(repr, unknown))}" if unknown else "")
                            + (f"; missing: {', '.join(map(repr, missing))}" if missing else "")
                            + f", e.g. {example}")
    if not isinstance(raw["key"], str) or not raw["key"]:
        raise ReadingsError(f"{origin}: readings.key must be a cell key (a string), got {raw['key']!r}")
    text = raw["text"]
    if not isinstance(text, list) or not text:
        raise ReadingsError(f"{origin}: readings.text must be a non-empty list of {raw['key']} values, got {text!r}")
    if not isinstance(raw["source"], str) or not raw["source"].strip():
        raise ReadingsError(f"{origin}: readings.source must say where the text gives its reading (a non-empty string)")
    return Readings(raw["key"], tuple(text), raw["source"].strip())


def text_entries(entries: Sequence[Mapping[str, Any]], readings: Optional[Readings],
                 cells: Sequence[Mapping[str, Any]] = (), ignore: Sequence[str] = ()) -> List[Mapping[str, Any]]:
    """The paper ``entries`` that are the text's reading: a number copied beside an alternative
    reading (``readings``) is not a paper cell of its own.  An entry that names the readings key is
    the text's if its value is; one that does not (keyed by model / norm) unless only cells of
    alternative readings among the suite's ``cells`` match it."""
    if readings is None:
        return list(entries)

    def is_text(e: Mapping[str, Any]) -> bool:
        if readings.key in e:
            return readings.is_text(e[readings.key])
        found = [c for c in cells if entry_matches(e, c["config"], cell_value, lb._norm, ignore)]
        return not found or bool(text_cells(found, readings))
    return [e for e in entries if is_text(e)]


def text_cells(cells: Sequence[Mapping[str, Any]], readings: Optional[Readings]) -> Tuple[Mapping[str, Any], ...]:
    """The suite ``cells`` of the text's reading (all of them where the suite declares no ``readings``)."""
    if readings is None:
        return tuple(cells)
    return tuple(c for c in cells if readings.is_text(cell_value(c["config"], readings.key)))
