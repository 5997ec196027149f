"""Triton's interpreter must be switched on before triton is first imported (its standard
library's functions are decorated at import): the Triton tests here run interpreted on CPU."""
import os
import sys

#: Whether something imported triton before this conftest could switch the interpreter on.
TRITON_IMPORTED_EARLY = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
os.environ.setdefault("TRITON_INTERPRET", "1")
