"""``zoo.build``: resolve a name (and preset), validate options, construct, then initialise."""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Dict, Optional

from zoo._names import unknown_kwargs_error
from zoo.registry import MODELS, constructor_options, preset

if TYPE_CHECKING:  # pragma: no cover - torch loads with the model families, not with zoo.build
    from torch import nn

# Options that build() consumes itself rather than passing to the model constructor.
_PLUGIN_KEYS = ("init", "init_kwargs", "check_inputs")
# Sizes every model family shares: each must be an int >= 1 (None = unset where allowed).
_POSITIVE_INTS = ("in_dim", "out_dim", "hidden_dim", "num_layers", "heads", "out_heads", "ffn_dim")


def _check_option_types(owner: str, options: Dict[str, Any], accepted: Dict[str, Any]) -> None:
    """Wrong-typed options fail here with their name, not deep inside a constructor: sizes are
    positive ints, and an option whose default is a bool / int / float takes that type (bools
    are not ints: ``num_layers=True`` is an error, not one layer)."""
    from zoo.nn.validation import positive_int

    for key, value in options.items():
        if key in _POSITIVE_INTS:
            positive_int(key, value, allow_none=accepted.get(key) is None)
            continue
        default = accepted.get(key, inspect.Parameter.empty)
        if isinstance(default, bool):
            ok, kind = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
        elif isinstance(default, float):
            ok, kind = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
        else:
            continue
        if not ok:
            raise ValueError(f"{owner}: {key} must be {kind}, got {value!r} ({type(value).__name__})")


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
    _check_option_types(f"model {key!r}", options, accepted)
    model = cls(**options)
    if not check_inputs:
        model.check_inputs = False

    from zoo.inits import apply_init  # local import: inits inspect model structure

    apply_init(model, init_name, **init_options)
    model.build_config = {"name": key, "preset": tag or None, "init": init_name if isinstance(init_name, str)
                          else getattr(init_name, "__name__", repr(init_name)),
                          "init_kwargs": init_options, **{k: v for k, v in options.items()}}
    return model
