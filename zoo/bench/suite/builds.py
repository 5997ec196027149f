"""Dry builds: every distinct architecture of a suite built once on a toy size, and every init checked
against its architecture, so a bad value fails before any training (no torch until a name is built)."""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from zoo.bench.suite import plugins as registries
from zoo.bench.suite.schema import Cell, SuiteError


def build_error(model: Mapping[str, Any]) -> Optional[str]:
    """Why the cell's model (``config["model"]``) cannot be built on a toy size, or ``None`` if it can."""
    try:
        registries.try_build(model["name"], model["norm"], model["norm_kwargs"], model["kwargs"])
    except (TypeError, ValueError) as e:
        return str(e)
    return None


def model_key(model: Mapping[str, Any]) -> str:
    return json.dumps([model["name"], model["norm"], model["norm_kwargs"], model["kwargs"]], sort_keys=True, default=str)


def dry_build(source: str, cells: Sequence[Cell]) -> None:
    """Build every distinct architecture once on a toy size, so bad values fail before any training."""
    seen = set()
    for c in cells:
        m = c.config["model"]
        key = model_key(m)
        if key in seen:
            continue
        seen.add(key)
        error = build_error(m)
        if error is not None:
            raise SuiteError(f"{source}: model {m['name']!r} with {m['kwargs']} (norm {m['norm']!r}) "
                             f"cannot be built: {error}")


def check_init_compatibility(source: str, cells: Sequence[Cell]) -> None:
    """Refuse, before any training, a cell whose init does not apply to its architecture (a balanced
    init with a norm that breaks the conservation law): its whole stacked group would fail."""
    seen = set()
    for c in cells:
        m = c.config["model"]
        key = json.dumps([model_key(m), m["init"], m["init_kwargs"]], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        reason = registries.init_incompatibility(m)
        if reason is not None:
            raise SuiteError(f"{source}: init {m['init']!r} does not apply to model {m['name']!r} with norm "
                             f"{m['norm']!r} and {m['kwargs'] or 'its defaults'} ({reason}); choose another init or "
                             "change what the reason names (in a suite: [[exclude]] those cells, e.g. when = "
                             f"{{init = \"{m['init']}\", norm = \"{m['norm']}\"}})")
