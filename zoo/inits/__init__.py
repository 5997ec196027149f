"""Initialisation plugins, applied by ``zoo.build`` after construction.

An init is a callable ``init(model, **options) -> None`` that sets the model's parameters in
place (:data:`InitFn`).  Register one with :func:`register_init`; choose it by name
(normalised: ``"Bal-O"`` == ``"bal_o"``) or pass the callable itself.
"""
from zoo.inits._registry import INITS, InitCheck, InitFn, apply_init, has_check, init_incompatibility, list_inits, register_init

# One import per plugin module (each registers its inits).
from zoo.inits import xavier as _xavier  # noqa: E402,F401  xavier, xavier_pyg, xavier_zero_att
from zoo.inits import orthogonal as _orthogonal  # noqa: E402,F401  ll_orthogonal, identity, ll_identity
from zoo.inits import balanced as _balanced  # noqa: E402,F401  balanced_* (bal_x, bal_o, ...)
from zoo.inits import variance as _variance  # noqa: E402,F401  large_variance, g_init
from zoo.inits import spoginit as _spoginit  # noqa: E402,F401  spoginit

__all__ = ["INITS", "InitCheck", "InitFn", "apply_init", "has_check", "init_incompatibility", "list_inits", "register_init"]
