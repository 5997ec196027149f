"""Triton's interpreter must be switched on before triton is first imported (its standard
library's functions are decorated at import): the Triton tests here run interpreted on CPU."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")
