"""Old import path, kept for one release: re-exports  (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.spec.selection import *  # noqa: F401,F403
from zoo._toml import tomllib  # noqa: F401
