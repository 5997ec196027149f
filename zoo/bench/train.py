"""Old import path, kept for one release: re-exports zoo.trainer (issue 22 moved it; import from there)."""
# flake8: noqa
from zoo.trainer.allocator import *  # noqa: F401,F403
from zoo.trainer.config import *  # noqa: F401,F403
from zoo.trainer.loop import *  # noqa: F401,F403
from zoo.trainer.replicas import *  # noqa: F401,F403
from zoo.trainer.results import *  # noqa: F401,F403
from zoo.trainer.views import *  # noqa: F401,F403
from zoo.trainer.views import GraphListView as _GraphList, TransductiveView as _Transductive, score as _score  # noqa: F401
from zoo.nn.readout import GraphPool  # noqa: F401
