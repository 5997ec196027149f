"""Diagnostics: conservation law and trainability (balance paper), oversmoothing (energies,
similarities, layer pruning, feature rank) and attention distribution (self-attention, entropy).
Each submodule defines ``__all__``."""
from zoo.diagnostics.attention import *  # noqa: F401,F403
from zoo.diagnostics.conservation import *  # noqa: F401,F403
from zoo.diagnostics.oversmoothing import *  # noqa: F401,F403
from zoo.diagnostics.rank import *  # noqa: F401,F403
from zoo.diagnostics.recorders import *  # noqa: F401,F403
