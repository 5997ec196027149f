"""Old import path, kept for one release: re-exports zoo.bench.run.modes (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.run.driver import *  # noqa: F401,F403
from zoo.bench.run.modes import *  # noqa: F401,F403
from zoo._io import write_atomic  # noqa: F401
from zoo.bench.run.modes import _slope, prune as _prune  # noqa: F401
