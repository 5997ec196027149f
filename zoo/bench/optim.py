"""Old import path, kept for one release: re-exports zoo.trainer.optim (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.trainer.optim import *  # noqa: F401,F403
from zoo.trainer.config import *  # noqa: F401,F403
