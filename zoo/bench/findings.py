"""Old import path, kept for one release: re-exports  (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.analyze.findings import *  # noqa: F401,F403
