"""Diagnostics: conservation law and trainability (balance paper) and oversmoothing (energies,
similarities, layer pruning).  Each submodule defines ``__all__``."""
from zoo.diagnostics.conservation import *  # noqa: F401,F403
from zoo.diagnostics.oversmoothing import *  # noqa: F401,F403
from zoo.diagnostics.recorders import *  # noqa: F401,F403
