"""Graph transforms usable on any dataset, by name.

``load(..., transforms=[...])`` accepts names (``"normalize_features"``), ``(name, kwargs)``
pairs, or callables ``Data -> Data`` (e.g. any ``torch_geometric.transforms`` object). Named
transforms subclass :class:`GraphTransform`: they are applied after the split is chosen, to
the one transductive graph or to every graph of every split, and each records a
human-readable ``describe()`` line in ``Task.preprocessing``.

Edge-set transforms wrap PyG's own (``ToUndirected``, ``TwoHop``, ``RemoveIsolatedNodes``,
``coalesce``, ``remove_self_loops``) so their semantics are PyG's.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, Union

import torch
import torch_geometric.transforms as T
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, degree, remove_self_loops

from .._names import Registry, normalize_name

TransformSpec = Union[str, Tuple[str, Mapping[str, Any]], Callable[[Data], Data]]

TRANSFORMS: "Registry[Type[GraphTransform]]" = Registry("transform")


class GraphTransform:
    """A named, described transform. ``split`` is the split a graph belongs to (graph-list
    tasks) or None for a transductive graph."""

    name: str = ""

    def fit(self, graphs: Sequence[Data]) -> None:
        """See every graph before any is transformed (e.g. a shared maximum degree)."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:  # pragma: no cover
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


def register_transform(name: str) -> Callable[[Type[GraphTransform]], Type[GraphTransform]]:
    def deco(cls: Type[GraphTransform]) -> Type[GraphTransform]:
        cls.name = normalize_name(name)
        TRANSFORMS.add(name, cls)
        return cls
    return deco


@register_transform("missing_features")
class MissingFeatures(GraphTransform):
    """Missing-vector setting (Zhao & Akoglu 2020; LipschitzNorm paper §7.1).

    For a random subset M of the unlabelled nodes V_u with |M| = round(p |V_u|), the feature
    rows X_j, j in M, are set to zero. Unlabelled means: outside ``train_mask`` on a
    transductive graph; outside ``label_mask`` (if any) on a training graph; every node of a
    validation or test graph. ``p = 1`` removes all unlabelled features (the 100% setting).
    A ``missing_mask`` attribute records the removed nodes.
    """

    def __init__(self, p: float, seed: int = 0) -> None:
        if not 0.0 <= float(p) <= 1.0:
            raise ValueError(f"missing_features: p must be in [0, 1], got {p}")
        self.p, self.seed = float(p), int(seed)
        self._calls = 0

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        n = data.num_nodes
        if split is None:
            if getattr(data, "train_mask", None) is None:
                raise ValueError("missing_features needs a train_mask on a transductive graph")
            unlabelled = ~data.train_mask
        elif split == "train":
            lm = getattr(data, "label_mask", None)
            unlabelled = ~lm if lm is not None else torch.zeros(n, dtype=torch.bool)
        else:
            unlabelled = torch.ones(n, dtype=torch.bool)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self._calls)
        self._calls += 1
        idx = unlabelled.nonzero().view(-1)
        chosen = idx[torch.randperm(idx.numel(), generator=g)[: int(round(self.p * idx.numel()))]]
        data = data.clone()
        data.x = data.x.clone()
        data.x[chosen] = 0
        data.missing_mask = torch.zeros(n, dtype=torch.bool)
        data.missing_mask[chosen] = True
        return data

    def describe(self) -> str:
        return f"missing_features(p={self.p}, seed={self.seed})"


@register_transform("degree_onehot")
class DegreeOneHot(GraphTransform):
    """One-hot in-degree features (PyG ``OneHotDegree``); ``cat`` appends them to ``x``.

    ``max_degree`` defaults to the largest degree over all graphs of the task, so every
    graph gets the same feature width.
    """

    def __init__(self, max_degree: Optional[int] = None, cat: bool = False) -> None:
        self.max_degree, self.cat = max_degree, bool(cat)

    def fit(self, graphs: Sequence[Data]) -> None:
        if self.max_degree is None:
            self.max_degree = max(
                (int(degree(g.edge_index[1], g.num_nodes, dtype=torch.long).max()) if g.num_edges else 0)
                for g in graphs)

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        if self.max_degree is None:
            self.fit([data])
        data = data.clone()
        if not self.cat or getattr(data, "x", None) is None:
            data.num_nodes = data.num_nodes  # pin it: isolated trailing nodes would vanish with x
            data.x = None
        return T.OneHotDegree(int(self.max_degree), in_degree=True, cat=self.cat)(data)

    def describe(self) -> str:
        return f"degree_onehot(max_degree={self.max_degree}, cat={self.cat})"


@register_transform("two_hop")
class TwoHopEdges(GraphTransform):
    """Attend over 2-hop neighbourhoods: edges of A + A^2 (PyG ``TwoHop``)."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        return T.TwoHop()(data.clone())


@register_transform("no_self_loops")
class NoSelfLoops(GraphTransform):
    """Drop self-loops (i, i) from ``edge_index``."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        data = data.clone()
        data.edge_index, data.edge_attr = remove_self_loops(data.edge_index, getattr(data, "edge_attr", None))
        return data


@register_transform("no_edges")
class NoEdges(GraphTransform):
    """Drop every edge, keeping the nodes, their features and masks: a model that adds self-loops
    then attends each node to itself alone (the attention matrix is the identity), the control
    that separates what the mask mixes from what the layers' weights do."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        data = data.clone()
        data.edge_index = data.edge_index[:, :0]
        if getattr(data, "edge_attr", None) is not None:
            data.edge_attr = data.edge_attr[:0]
        return data


@register_transform("undirected")
class Undirected(GraphTransform):
    """Add the reverse of every edge, then drop duplicates (PyG ``ToUndirected``)."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        return T.ToUndirected()(data.clone())


@register_transform("dedupe_edges")
class DedupeEdges(GraphTransform):
    """Sort ``edge_index`` and keep one copy of every repeated edge (``coalesce``)."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        data = data.clone()
        if getattr(data, "edge_attr", None) is not None:
            data.edge_index, data.edge_attr = coalesce(data.edge_index, data.edge_attr, data.num_nodes)
        else:
            data.edge_index = coalesce(data.edge_index, num_nodes=data.num_nodes)
        return data


@register_transform("normalize_features")
class NormalizeFeatures(GraphTransform):
    """Row-normalise ``x`` to sum to one (PyG ``NormalizeFeatures``; zero rows stay zero)."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        return T.NormalizeFeatures()(data.clone())


@register_transform("remove_isolated")
class RemoveIsolated(GraphTransform):
    """Remove nodes with no edge (self-loops do not count); masks and labels follow."""

    def __call__(self, data: Data, split: Optional[str] = None) -> Data:
        return T.RemoveIsolatedNodes()(data.clone())


def make_transform(spec: TransformSpec, seed: int) -> Tuple[Callable[..., Data], str]:
    """Resolve a name / (name, kwargs) / callable into ``(transform, description)``.

    Named transforms that take a ``seed`` get the task's seed unless one is given.
    """
    if isinstance(spec, (str, tuple, list)):
        if isinstance(spec, str):
            name, kwargs = spec, {}
        else:
            if len(spec) != 2 or not isinstance(spec[0], str) or not isinstance(spec[1], Mapping):
                raise TypeError(f"a transform pair must be (name, {{kwargs}}), got {spec!r}")
            name, kwargs = spec[0], dict(spec[1])
        if "seed" in (TRANSFORMS.options(name) or {}) and "seed" not in kwargs:
            kwargs["seed"] = seed
        t = TRANSFORMS.create(name, **kwargs)
        return t, t.describe()
    if callable(spec):
        desc = getattr(spec, "describe", None)
        return spec, desc() if callable(desc) else repr(spec)
    raise TypeError(f"a transform must be a name, a (name, kwargs) pair or a callable; got {spec!r}")


def apply_transforms(data: Data, transforms: Iterable[Callable[..., Data]]) -> Data:
    for t in transforms:
        if isinstance(t, GraphTransform):
            t.fit([data])
            data = t(data, None)
        else:
            data = t(data)
    return data


def apply_transforms_to_graphs(graphs: Dict[str, Sequence[Data]],
                               transforms: Iterable[Callable[..., Data]]) -> Dict[str, List[Data]]:
    out: Dict[str, List[Data]] = {s: list(g) for s, g in graphs.items()}
    for t in transforms:
        if isinstance(t, GraphTransform):
            t.fit([g for gs in out.values() for g in gs])
            out = {s: [t(g, s) for g in gs] for s, gs in out.items()}
        else:
            out = {s: [t(g) for g in gs] for s, gs in out.items()}
    return out


def names() -> List[str]:
    return TRANSFORMS.names()
