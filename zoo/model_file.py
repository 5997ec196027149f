"""``zoo.save`` and the model-file half of ``zoo.load``: a model file, a model's weights with everything
needed to rebuild it (``zoo.load`` itself, which also reads results folders, is :mod:`zoo.loading`).

A model file is one ``.safetensors`` file: the model's ``state_dict`` as safetensors tensors (no
pickle: loading runs no code from the file) and, in the safetensors header's metadata, one JSON
entry ``zoo_checkpoint`` (the key files have always carried) holding

* ``format`` (this module's layout, ``1``) and ``zoo_version`` (the writer's ``zoo.__version__``);
* ``build``: the model's full build configuration as ``zoo.build`` recorded it (name, preset,
  every option, init, norm), so ``zoo.load`` rebuilds the model without the user repeating options;
* ``head``: for graph tasks, the :class:`~zoo.nn.readout.GraphPool` head around the GNN (else null);
* ``dtype`` of the floating-point state, and ``extra``: free JSON (e.g. the bench's cell id, seed,
  selected epoch and metrics).

A model file from a newer zoo, or one whose options this zoo does not know, is refused with one
line naming the problem and the fix (``ValueError``), never a half-built model.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from zoo._io import output_file, user_path, write_atomic
from zoo._version import __version__
from zoo.build import build as build_model
from zoo.nn.readout import GraphPool

PathLike = Union[str, Path]

FORMAT = 1
META_KEY = "zoo_checkpoint"
SUFFIX = ".safetensors"

__all__ = ["save", "load", "read_header", "state_bytes", "FORMAT"]


def _version_tuple(text: str) -> Tuple[int, ...]:
    parts = []
    for piece in str(text).split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _zoo_version() -> str:
    return __version__


def _json_safe(owner: str, value: Any) -> Any:
    """``value`` if it survives a JSON round trip unchanged, else a one-line ``TypeError``."""
    try:
        if json.loads(json.dumps(value)) == value:
            return value
    except (TypeError, ValueError):
        pass
    raise TypeError(f"{owner} = {value!r} cannot be written to a model file (JSON numbers, strings, lists and "
                    "tables only); build the model with registered plugin names (e.g. init='bal_o', not a function)")


def describe(model: nn.Module) -> Dict[str, Any]:
    """The model file header's ``build`` and ``head`` entries of ``model`` (a ``zoo.build`` model, or a
    :class:`GraphPool` around one)."""
    head = None
    gnn = model
    if isinstance(model, GraphPool):
        head = getattr(model, "config", None)
        if head is None:
            raise TypeError("this GraphPool's readout is a module, which a model file cannot name; build it with a "
                            "registered readout name (e.g. readout='mean') to save it")
        gnn = model.gnn
    build = getattr(gnn, "build_config", None)
    if not isinstance(build, dict):
        raise TypeError(f"{type(gnn).__name__} was not built by zoo.build (no build_config): zoo.save stores how to "
                        "rebuild the model; build it with zoo.build(...), or save its state_dict with safetensors")
    return {"build": {k: _json_safe(f"option {k}", v) for k, v in build.items()},
            "head": None if head is None else {k: _json_safe(f"head option {k}", v) for k, v in head.items()}}


def _state(model: nn.Module) -> Dict[str, Tensor]:
    # clone: safetensors refuses tensors that share storage (tied weights) and non-contiguous ones
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in model.state_dict().items()}


def _header(model: nn.Module, state: Dict[str, Tensor], extra: Optional[Dict[str, Any]]) -> Dict[str, str]:
    floats = {str(v.dtype).replace("torch.", "") for v in state.values() if v.is_floating_point()}
    header = {"format": FORMAT, "zoo_version": _zoo_version(), **describe(model),
              "dtype": floats.pop() if len(floats) == 1 else None,
              "extra": _json_safe("extra", dict(extra or {}))}
    return {META_KEY: json.dumps(header, sort_keys=True)}


def state_bytes(model_or_state: Any, header: Dict[str, Any]) -> bytes:
    """A model file as bytes: ``model_or_state`` is a model or a ``state_dict``, ``header`` the
    entries of :func:`read_header` (``format`` and ``zoo_version`` are filled in).  Workers of
    ``zoo bench`` send these to the driver, which writes them beside the records."""
    from safetensors.torch import save

    state = _state(model_or_state) if isinstance(model_or_state, nn.Module) else \
        {k: v.detach().to("cpu").contiguous().clone() for k, v in model_or_state.items()}
    meta = {"format": FORMAT, "zoo_version": _zoo_version(), "extra": {}, "head": None, "dtype": None, **header}
    return save(state, metadata={META_KEY: json.dumps(meta, sort_keys=True)})


def save(model: nn.Module, path: PathLike, *, extra: Optional[Dict[str, Any]] = None,
         overwrite: bool = False) -> Path:
    """Write ``model``'s weights and build configuration to ``path`` (``.safetensors`` is appended
    when missing: :func:`load` takes either name; an existing folder gets ``model.safetensors``); ``extra``: JSON values kept in the header (read
    back by :func:`read_header`).  Replacing an existing file warns unless ``overwrite``.

    The model must come from ``zoo.build`` (or be a ``GraphPool`` around one): its build
    configuration is what :func:`load` rebuilds from.  Returns the path written (atomically).
    """
    from safetensors.torch import save as to_bytes

    path = user_path(path)
    if path.suffix != SUFFIX and not path.is_dir():
        path = path.with_name(path.name + SUFFIX)
    path = output_file(path, "model" + SUFFIX)  # an existing folder: model.safetensors in it
    state = _state(model)
    data = to_bytes(state, metadata=_header(model, state, extra))
    if path.exists() and not overwrite:
        warnings.warn(f"zoo.save: replacing {path} (pass overwrite=True to replace without this warning)",
                      UserWarning, stacklevel=2)
    write_atomic(path, data)
    return path


def _parse_header(raw: Optional[Dict[str, str]], source: str) -> Dict[str, Any]:
    if not raw or META_KEY not in raw:
        raise ValueError(f"{source} is a safetensors file but not a zoo model file (no {META_KEY!r} header); "
                         "load its state with safetensors.torch.load_file and model.load_state_dict")
    try:
        header = json.loads(raw[META_KEY])
    except json.JSONDecodeError as e:
        raise ValueError(f"{source}: the zoo model file header is not valid JSON ({e}); the file is damaged") from None
    written_by = str(header.get("zoo_version", "?"))
    if _version_tuple(written_by) > _version_tuple(_zoo_version()) or header.get("format", FORMAT) > FORMAT:
        raise ValueError(f"{source} was written by gat-zoo {written_by} (model file format {header.get('format')}), "
                         f"newer than this gat-zoo {_zoo_version()}; upgrade it: pip install -U gat-zoo")
    if not isinstance(header.get("build"), dict) or "name" not in header["build"]:
        raise ValueError(f"{source}: the zoo model file header has no build configuration; the file is damaged")
    return header


def read_header(path: PathLike) -> Dict[str, Any]:
    """The JSON header of the model file at ``path`` (build configuration, zoo version, dtype, extra)."""
    from safetensors import safe_open

    path = user_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    try:
        with safe_open(str(path), framework="pt") as fh:
            raw = fh.metadata()
    except Exception as e:  # safetensors raises its own error types for a damaged file
        raise ValueError(f"{path} is not a safetensors file ({type(e).__name__}: {e})") from None
    return _parse_header(raw, str(path))


def rebuild(header: Dict[str, Any], source: str) -> nn.Module:
    """The (freshly initialised) model that a model file's header describes."""
    build = dict(header["build"])
    name = build.pop("name")
    build.pop("preset", None)  # the preset's values are all in the recorded options
    if "checkpoint" in build:  # files written while DeepGNN's ``recompute`` option was called ``checkpoint``
        build["recompute"] = build.pop("checkpoint")
    try:
        model = build_model(name, **build)
    except (TypeError, ValueError, KeyError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{source} (written by gat-zoo {header.get('zoo_version')}) cannot be rebuilt by this "
                         f"gat-zoo {_zoo_version()}: {msg}") from None
    head = header.get("head")
    if head:
        model = GraphPool(model, **head)
    return model


def _load_state(model: nn.Module, state: Dict[str, Tensor], header: Dict[str, Any], source: str,
                device: Any) -> nn.Module:
    dtype = header.get("dtype")
    if dtype:
        model = model.to(getattr(torch, dtype))  # load_state_dict would round float64 weights to float32
    _materialise_lazy(model, state)
    missing, unexpected = [], []
    own = model.state_dict()
    for k in own:
        if k not in state:
            missing.append(k)
    for k in state:
        if k not in own:
            unexpected.append(k)
    if missing or unexpected:
        raise ValueError(f"{source}: the weights do not fit the rebuilt model (missing {missing[:3]}, unexpected "
                         f"{unexpected[:3]}); the file is damaged or was written by an incompatible zoo")
    model.load_state_dict(state, strict=True)
    return model.to(device) if device is not None else model


def _materialise_lazy(model: nn.Module, state: Dict[str, Tensor]) -> None:
    """Give what a model shapes on its first call the saved shapes before loading: lazily-shaped
    parameters and buffers registered as ``None`` (GATDB's per-edge ``xi`` and the edge index it
    is tied to)."""
    from torch.nn.parameter import UninitializedParameter

    for name, p in list(model.named_parameters()):
        if isinstance(p, UninitializedParameter) and name in state:
            p.materialize(state[name].shape, dtype=state[name].dtype)
    for prefix, module in model.named_modules():
        for key, buf in list(module._buffers.items()):
            full = f"{prefix}.{key}" if prefix else key
            if buf is None and full in state:
                module._buffers[key] = state[full].clone()


def load(path: PathLike, *, device: Any = None) -> nn.Module:
    """Rebuild the model saved at ``path`` by :func:`save` and load its weights; ``device`` moves it
    (default: the CPU).  ``path`` may leave out the ``.safetensors`` suffix that :func:`save` appended.

    The model is returned in training mode, as ``zoo.build`` returns it: call ``.eval()`` before
    evaluating.  The file's header is on ``model.saved_header`` (a dict).  ``zoo.load``
    (:mod:`zoo.loading`) also finds a run's file in a ``zoo bench`` results folder.
    """
    from safetensors.torch import load_file

    path = user_path(path)
    if path.is_dir() and (path / ("model" + SUFFIX)).is_file():
        path = path / ("model" + SUFFIX)  # a folder zoo.save wrote into
    if not path.exists() and path.suffix != SUFFIX and path.with_name(path.name + SUFFIX).is_file():
        path = path.with_name(path.name + SUFFIX)  # the name given to save, which appended the suffix
    header = read_header(path)
    model = rebuild(header, str(path))
    state = load_file(str(path))
    model = _load_state(model, state, header, str(path), device)
    model.saved_header = header
    return model
