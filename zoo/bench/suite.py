"""Old import path, kept for one release: re-exports zoo.bench.spec.measures (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.spec.suite import *  # noqa: F401,F403
from zoo.bench.spec.measures import *  # noqa: F401,F403
from zoo._toml import tomllib  # noqa: F401
from zoo.bench.spec.cells import cell_value  # noqa: F401
from zoo.bench.spec.plugins import canonical_name as _canonical  # noqa: F401
