"""The plugin registries as the spec sees them: names, canonical spellings and default options.

The spec layer is importable without torch, but the registries it validates against (models,
inits, norms, datasets, readouts, transforms) live in packages that import torch.  Every lookup
therefore goes through this one module, which imports a registry only when a lookup is made —
these are the spec's only function-level imports, kept here so the rest of ``spec/`` stays flat.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Sequence

from zoo._names import normalize_name

if TYPE_CHECKING:  # pragma: no cover
    from zoo.datasets import DatasetSpec

PLUGIN_KINDS = ("model", "init", "norm", "dataset", "readout")


def model_options(model: str) -> Dict[str, Any]:
    """Constructor options (with defaults) of ``model`` (``gat`` or a preset ``gat.tag``)."""
    import zoo.models  # noqa: F401  (torch: loaded on first lookup; registers the model families)
    from zoo.registry import MODELS, constructor_options

    return constructor_options(MODELS.get(model.split(".")[0]))


def dataset_spec(dataset: str) -> "DatasetSpec":
    """The dataset registry's card for ``dataset`` (sizes, options, kind)."""
    from zoo.datasets import get_spec  # torch: loaded on first lookup

    return get_spec(dataset)


def dataset_options(dataset: str) -> Dict[str, Any]:
    """Loader options (with defaults) of ``dataset``."""
    return dict(dataset_spec(dataset).options)


def canonical_name(kind: str, name: str) -> str:
    """The registered spelling of plugin ``name`` of ``kind`` (one of :data:`PLUGIN_KINDS`);
    an unknown name raises ``ValueError`` listing the close matches."""
    if kind == "model":
        import zoo.models  # noqa: F401  (registers the model families)
        from zoo.registry import MODELS

        base, _, tag = name.partition(".")
        return MODELS.canonical(base) + (f".{normalize_name(tag)}" if tag else "")
    if kind == "init":
        from zoo.inits import INITS

        return INITS.canonical(name)
    if kind == "norm":
        from zoo.norms import NORMS

        return NORMS.canonical(name)
    if kind == "dataset":
        from zoo.datasets import DATASETS

        return DATASETS.canonical(name)
    if kind == "readout":
        from zoo.nn.readout import READOUTS

        return READOUTS.canonical(name)
    raise ValueError(f"unknown plugin kind {kind!r}; one of {', '.join(PLUGIN_KINDS)}")


def canonical_transform(name: str) -> str:
    """The registered spelling of dataset transform ``name``."""
    from zoo.datasets.transforms import TRANSFORMS

    return TRANSFORMS.canonical(name)


def try_build(name: str, norm: str, norm_kwargs: Any, kwargs: Dict[str, Any]) -> None:
    """Build model ``name`` once on a toy size (8 -> 4); bad options raise ``TypeError``/``ValueError``."""
    import zoo

    zoo.build(name, in_dim=8, out_dim=4, init="xavier", norm=norm, norm_kwargs=norm_kwargs or None, **kwargs)


__all__: Sequence[str] = ("PLUGIN_KINDS", "model_options", "dataset_spec", "dataset_options", "canonical_name",
                          "canonical_transform", "try_build")
