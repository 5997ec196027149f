"""Old import path, kept for one release: re-exports zoo.bench.run.provenance (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.store.records import *  # noqa: F401,F403
from zoo.bench.run.provenance import *  # noqa: F401,F403
