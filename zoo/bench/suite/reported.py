"""A suite's reported numbers: the paper's values stored as data beside the suite (``reported = FILE``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from zoo.bench.suite.schema import SuiteError


def load_reported(path: Path) -> Dict[str, Any]:
    """Paper numbers stored as data: ``{"source", "entries": [{..match keys.., "value", "ci95", "table"}]}``."""
    if not path.is_file():
        raise SuiteError(f"reported numbers file {path} does not exist")
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data.get("entries"), list):
        raise SuiteError(f"{path}: needs an 'entries' list")
    for i, e in enumerate(data["entries"]):
        if "value" not in e or "table" not in e:
            raise SuiteError(f"{path}: entry #{i + 1} needs 'value' and 'table' (e.g. \"Table 2\")")
    return data
