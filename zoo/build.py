"""``zoo.build``: resolve a name (and preset), validate options, construct, then initialise."""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Dict, Optional

from zoo.registry import MODELS, preset

if TYPE_CHECKING:  # pragma: no cover - torch loads with the model families, not with zoo.build
    from torch import nn


def build(
    name: str,
    *,
    init: Any = None,
    init_kwargs: Optional[Dict[str, Any]] = None,
    check_inputs: bool = True,
    **kwargs: Any,
) -> nn.Module:
    """Build a registered model by ``name`` or preset ``name.tag``.

    ``kwargs`` override the preset's values; a ``None`` value does not override (so a CLI or
    suite can pass "unset" options through).  ``norm``/``norm_kwargs`` select a norm plugin,
    ``init``/``init_kwargs`` an initialisation plugin applied after construction (default
    ``xavier``).  ``check_inputs=False`` skips the models' NaN/inf scan of node features (feature
    width and dtype are always checked; ``docs/reliability.md``).

    Example::

        model = zoo.build("gatv2", in_dim=1433, out_dim=7, num_layers=64, init="bal_o")
    """
    if not isinstance(name, str):
        raise TypeError(f"zoo.build needs a model name, e.g. zoo.build('gat', in_dim=..., out_dim=...); got {name!r} "
                        f"({type(name).__name__}); zoo.list_models() lists the names")
    model_name, _, tag = name.partition(".")
    key = MODELS.canonical(model_name)
    options: Dict[str, Any] = preset(key, tag) if tag else {}
    options.update({k: v for k, v in kwargs.items() if v is not None})
    if init is not None:
        options["init"] = init
    if init_kwargs is not None:
        options["init_kwargs"] = init_kwargs
    init_name = options.pop("init", "xavier")
    init_options = dict(options.pop("init_kwargs", None) or {})

    MODELS.check(key, options)  # names (an option of other families names them), sizes, types
    accepted = MODELS.options(key)
    missing = [k for k in ("in_dim", "out_dim") if k not in options and accepted.get(k) is inspect.Parameter.empty]
    if missing:
        raise TypeError(
            f"build({name!r}) needs {' and '.join(missing)}: the input feature size and the number of "
            "outputs (classes) of your task, e.g. in_dim=data.num_features, out_dim=num_classes"
        )
    model = MODELS.create(key, **options)
    if not check_inputs:
        model.check_inputs = False
    # zoo/__init__ binds this module eagerly and `import zoo` loads no torch: the inits (torch) load here
    from zoo.inits import INITS, apply_init

    apply_init(model, init_name, **init_options)
    model.build_config = {"name": key, "preset": tag or None,
                          "init": INITS.canonical(init_name) if isinstance(init_name, str)
                          else getattr(init_name, "__name__", repr(init_name)),
                          "init_kwargs": init_options, **{k: v for k, v in options.items()}}
    return model
