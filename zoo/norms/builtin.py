"""Imports every norm plugin module so that they register (one import line per plugin)."""
from zoo.norms import lipschitz  # noqa: F401,E402
from zoo.norms import pairnorm  # noqa: F401,E402
from zoo.norms import layernorm  # noqa: F401,E402
