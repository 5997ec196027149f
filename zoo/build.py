"""``zoo.build``: resolve a name (and preset), validate options, construct, then initialise."""
from __future__ import annotations

import inspect
from typing import Any, Dict, Optional

from torch import nn

from zoo._names import unknown_kwargs_error
from zoo.registry import MODELS, constructor_options, preset

# Options that build() consumes itself rather than passing to the model constructor.
_PLUGIN_KEYS = ("init", "init_kwargs")


def build(
    name: str,
    *,
    init: Any = None,
    init_kwargs: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> nn.Module:
    """Build a registered model by ``name`` or preset ``name.tag``.

    ``kwargs`` override the preset's values; a ``None`` value does not override (so a CLI or
    suite can pass "unset" options through).  ``norm``/``norm_kwargs`` select a norm plugin,
    ``init``/``init_kwargs`` an initialisation plugin applied after construction (default
    ``xavier``).

    Example::

        model = zoo.build("gatv2", in_dim=1433, out_dim=7, num_layers=64, init="bal_o")
    """
    model_name, _, tag = name.partition(".")
    key = MODELS.canonical(model_name)
    cls = MODELS.get(key)
    options: Dict[str, Any] = preset(key, tag) if tag else {}
    options.update({k: v for k, v in kwargs.items() if v is not None})
    if init is not None:
        options["init"] = init
    if init_kwargs is not None:
        options["init_kwargs"] = init_kwargs
    init_name = options.pop("init", "xavier")
    init_options = dict(options.pop("init_kwargs", None) or {})

    accepted = constructor_options(cls)
    unknown = set(options) - set(accepted)
    if unknown:
        raise unknown_kwargs_error(f"model {key!r}", unknown, [*accepted, *_PLUGIN_KEYS])
    missing = [k for k in ("in_dim", "out_dim") if k not in options and k in accepted
               and accepted[k] is inspect.Parameter.empty]
    if missing:
        raise TypeError(
            f"build({name!r}) needs {' and '.join(missing)}: the input feature size and the number of "
            "outputs (classes) of your task, e.g. in_dim=data.num_features, out_dim=num_classes"
        )
    model = cls(**options)

    from zoo.inits import apply_init  # local import: inits inspect model structure

    apply_init(model, init_name, **init_options)
    model.build_config = {"name": key, "preset": tag or None, "init": init_name if isinstance(init_name, str)
                          else getattr(init_name, "__name__", repr(init_name)),
                          "init_kwargs": init_options, **{k: v for k, v in options.items()}}
    return model
