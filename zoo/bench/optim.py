"""Old import path, kept for one release: re-exports zoo.bench.spec.config (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.run.optim import *  # noqa: F401,F403
from zoo.bench.spec.config import *  # noqa: F401,F403
