"""Old import path, kept for one release: re-exports zoo.bench.render.leaderboard (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.analyze.board import *  # noqa: F401,F403
from zoo.bench.render.leaderboard import *  # noqa: F401,F403
from zoo.bench.analyze.board import find_reported as _find_reported, sort_key as _sort_key  # noqa: F401
from zoo.bench.publish import write_leaderboard  # noqa: F401
from zoo.bench.spec.cells import cell_value  # noqa: F401
from zoo.bench.store.folders import read_folder  # noqa: F401
