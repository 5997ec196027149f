"""Model families. Adding a model = one file here + one import line below."""
from zoo.models import gcn, gat, gatv2, gatdb, gate  # noqa: F401
from zoo.models import gin, ggnn  # noqa: F401
from zoo.models import transformer  # noqa: F401
from zoo.models import unimp  # noqa: F401
from zoo.models import san  # noqa: F401
from zoo.models import faf  # noqa: F401
from zoo.models import pyg_transformers  # noqa: F401
