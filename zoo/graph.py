"""Graph input: accept an ``edge_index``, a PyG ``Data`` or a ``dgl.DGLGraph``; validate once.

Every model is called as ``model(graph, x)``.  :func:`as_graph` turns whatever was passed
into a :class:`Graph` — edges ``src -> dst`` sorted by destination, with the model's
self-loop policy applied — and caches it on the input object, so a training loop that
passes the same graph 5000 times validates and re-indexes it once.  The cache is
invalidated when the edge tensor is modified in place (tensor version counter).
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

SELF_LOOP_POLICIES = ("add", "keep", "remove")
GraphLike = Union[Tensor, Any]  # (2, E) LongTensor | torch_geometric.data.Data | dgl.DGLGraph


class Graph:
    """A validated graph in the form the layers consume.

    Attributes:
        edge_index: ``(2, E)`` long tensor of edges ``src -> dst`` (messages flow from
            ``edge_index[0]`` to ``edge_index[1]``), sorted by destination.
        num_nodes: number of nodes ``N``.
        self_loops: the policy that produced ``edge_index`` (``"add"``: existing
            self-loops removed and one added per node, as in GAT; ``"keep"``; ``"remove"``).
    """

    __slots__ = ("edge_index", "num_nodes", "self_loops", "_cache", "__weakref__")

    def __init__(self, edge_index: Tensor, num_nodes: int, self_loops: str) -> None:
        self.edge_index = edge_index
        self.num_nodes = int(num_nodes)
        self.self_loops = self_loops
        self._cache: Dict[str, Any] = {}

    @property
    def src(self) -> Tensor:
        return self.edge_index[0]

    @property
    def dst(self) -> Tensor:
        return self.edge_index[1]

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    @property
    def device(self) -> torch.device:
        return self.edge_index.device

    def cached(self, key: str, compute: Callable[[], Any], dtype: Optional[torch.dtype] = None) -> Any:
        """Memoise a per-graph quantity (degrees, normalisation, Laplacian eigenvectors...).

        A floating-point quantity must pass the ``dtype`` it is computed in (that of the
        features it will meet): the cache key holds the dtype and the device, so a float64
        forward never reuses (or is rounded through) a float32 copy.
        """
        full = (key, None if dtype is None else str(dtype), str(self.device))
        if full not in self._cache:
            self._cache[full] = compute()
        return self._cache[full]

    def in_degree(self, dtype: Optional[torch.dtype] = None) -> Tensor:
        """Number of incoming edges per node (after the self-loop policy), in ``dtype``
        (default: torch's default dtype) on the graph's device."""
        dtype = dtype or torch.get_default_dtype()
        return self.cached(
            "in_degree",
            lambda: torch.zeros(self.num_nodes, dtype=dtype, device=self.device).index_add_(
                0, self.dst, torch.ones(self.num_edges, dtype=dtype, device=self.device)
            ),
            dtype=dtype,
        )

    def __repr__(self) -> str:
        return f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, self_loops={self.self_loops!r})"


class _GraphCache:
    """Normalised graphs per input object, keyed by ``id`` (tensors cannot be dict keys: their
    ``==`` is elementwise); an entry is dropped when its object is garbage-collected."""

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple[Any, Dict[Tuple[str, str], Tuple[Any, Graph]]]] = {}

    def lookup(self, obj: Any) -> Optional[Dict[Tuple[str, str], Tuple[Any, Graph]]]:
        hit = self._entries.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj else None

    def store(self, obj: Any, key: Tuple[str, str], value: Tuple[Any, Graph]) -> None:
        entries = self.lookup(obj)
        if entries is None:
            try:
                ref = weakref.ref(obj)
            except TypeError:  # not weak-referenceable: do not cache
                return
            entries = {}
            self._entries[id(obj)] = (ref, entries)
            weakref.finalize(obj, self._entries.pop, id(obj), None)
        entries[key] = value


_CACHE = _GraphCache()


def _is_dgl_graph(obj: Any) -> bool:
    # Checked by module name so that DGL is imported only when a DGL graph is passed.
    return type(obj).__module__.split(".")[0] == "dgl" and hasattr(obj, "edges") and hasattr(obj, "num_nodes")


def _stamp(graph: GraphLike, x: Optional[Tensor]) -> Any:
    """A cheap fingerprint that changes whenever the normalised graph may change (``None``: don't cache).

    Computed before any edges are read, so a cache hit costs no tensor work on the hot path.
    """
    if isinstance(graph, Tensor):  # the node count comes from x: part of the fingerprint
        return graph._version, None if x is None else x.size(0)
    if _is_dgl_graph(graph):  # DGL graphs' structure is immutable
        return int(graph.num_nodes()), int(graph.num_edges())
    edge_index = getattr(graph, "edge_index", None)
    if isinstance(edge_index, Tensor):
        return id(edge_index), edge_index._version, getattr(graph, "num_nodes", None)
    return None


def _read_edges(graph: GraphLike, x: Optional[Tensor]) -> Tuple[Tensor, int]:
    """Return (edge_index, num_nodes) for any supported graph type."""
    if isinstance(graph, Graph):
        return graph.edge_index, graph.num_nodes
    if isinstance(graph, Tensor):
        if x is None:
            raise ValueError("an edge_index graph needs the node features x to know the number of nodes")
        return graph, x.size(0)
    if _is_dgl_graph(graph):
        src, dst = graph.edges(order="eid")
        return torch.stack([src, dst]).long(), int(graph.num_nodes())
    edge_index = getattr(graph, "edge_index", None)
    if isinstance(edge_index, Tensor):  # torch_geometric.data.Data and look-alikes
        num_nodes = getattr(graph, "num_nodes", None)
        if num_nodes is None:
            num_nodes = x.size(0) if x is not None else int(edge_index.max()) + 1
        return edge_index, int(num_nodes)
    raise TypeError(
        f"cannot read a graph from {type(graph).__name__}: pass a (2, E) edge_index LongTensor, "
        "a torch_geometric.data.Data with edge_index, or a dgl.DGLGraph"
    )


def _validate(edge_index: Tensor, num_nodes: int) -> None:
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(
            f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}; "
            "if you have an (E, 2) edge list, pass edge_list.t()"
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"edge_index must hold integer node indices, got dtype {edge_index.dtype}")
    if edge_index.numel():
        low, high = int(edge_index.min()), int(edge_index.max())
        bad = low if low < 0 else high
        if low < 0 or high >= num_nodes:
            raise ValueError(
                f"edge_index refers to node {bad} but the graph has {num_nodes} nodes "
                f"(valid indices 0..{num_nodes - 1}); check that x has one row per node"
            )


def _apply_policy(edge_index: Tensor, num_nodes: int, policy: str) -> Tensor:
    if policy == "keep":
        ei = edge_index
    else:
        ei = edge_index[:, edge_index[0] != edge_index[1]]
        if policy == "add":
            loops = torch.arange(num_nodes, device=ei.device).expand(2, num_nodes)
            ei = torch.cat([ei, loops], dim=1)
    # Sorting by destination keeps every node's incoming edges contiguous (better scatter locality).
    order = torch.argsort(ei[1] * num_nodes + ei[0], stable=True)
    return ei[:, order].contiguous()


def as_graph(graph: GraphLike, x: Optional[Tensor] = None, self_loops: str = "add") -> Graph:
    """Validate ``graph`` and return the normalised :class:`Graph` for ``self_loops`` (cached).

    Raises:
        ValueError: malformed ``edge_index``, indices out of range, or ``x`` with a number of
            rows different from the number of nodes.
    """
    if self_loops not in SELF_LOOP_POLICIES:
        raise ValueError(f"unknown self_loops policy {self_loops!r}; choose one of {SELF_LOOP_POLICIES}")
    if isinstance(graph, Graph) and graph.self_loops == self_loops:
        result = graph
    else:
        device = x.device if x is not None else None
        key = (self_loops, str(device))
        stamp = _stamp(graph, x)
        entries = _CACHE.lookup(graph) if stamp is not None else None
        hit = entries.get(key) if entries is not None else None
        if hit is not None and hit[0] == stamp:
            result = hit[1]
        else:
            edge_index, num_nodes = _read_edges(graph, x)
            _validate(edge_index, num_nodes)
            ei = edge_index.long()
            if device is not None:
                ei = ei.to(device)
            result = Graph(_apply_policy(ei, num_nodes, self_loops), num_nodes, self_loops)
            if stamp is not None:
                _CACHE.store(graph, key, (stamp, result))
    if x is not None and x.size(0) != result.num_nodes:
        raise ValueError(
            f"node features have {x.size(0)} rows but the graph has {result.num_nodes} nodes; "
            "x must have one row per node"
        )
    return result
