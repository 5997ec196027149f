"""Old import path, kept for one release: re-exports  (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.bench.render.html import *  # noqa: F401,F403
from zoo.bench.render.html import slug as _slug  # noqa: F401
