"""docs/benchmarks.md's "Defaults" table is the schema's defaults: the one place they are written."""
from __future__ import annotations

import json
import re

from tests.conftest import REPO
from zoo.bench.suite.schema import PLUGIN_KEYS, RUN_KEYS, TASK_KEYS, TRAIN_KEYS

#: keys without a default value of their own (a cell names them, or the dataset / task decides)
NO_DEFAULT = {"dataset", "model", "variant", "split", "readout"}


def _documented() -> dict:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    section = text.split("### Defaults", 1)[1].split("\n#", 1)[0]
    out = {}
    for row in re.findall(r"^\|(.+)\|$", section, re.M):
        cells = [c.strip() for c in row.split("|")]
        for key, value in zip(cells[::2], cells[1::2]):
            if key.startswith("`"):
                out[key.strip("`")] = value
    return out


def _written(value) -> str:
    """How the table writes a default: names and numbers in backticks, ``None`` as "unset"."""
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{value}`" if isinstance(value, (str, int, float)) else f"`{json.dumps(value)}`"


def test_the_defaults_table_is_the_schemas():
    schema = {k: v for table in (TRAIN_KEYS, RUN_KEYS, TASK_KEYS, PLUGIN_KEYS) for k, v in table.items()
              if k not in NO_DEFAULT}
    documented = _documented()
    assert sorted(documented) == sorted(schema), "every key with a default is in the table, once"
    for key, value in schema.items():
        assert documented[key].split(" (")[0] == _written(value), key
