"""Graph input: accept an ``edge_index``, a PyG ``Data`` or a ``dgl.DGLGraph``; validate once.

Every model is called as ``model(graph, x)``.  :func:`as_graph` turns whatever was passed
into a :class:`Graph` — edges ``src -> dst`` sorted by destination, with the model's
self-loop policy applied — and caches it on the input object, so a training loop that
passes the same graph 5000 times validates and re-indexes it once.

The cache contract (``docs/reliability.md``): a graph whose structure may have changed is
never served from the cache.  A cheap fingerprint (identity, storage pointer, version
counter, shape, node count; for DGL the graph index object and the counts) is checked on
every call, and for graphs of up to :data:`CONTENT_CHECK_MAX_EDGES` edges the edges
themselves are compared with a copy taken when the entry was made, which also catches edits
that bypass the version counter (``edge_index.data[...] = ...``, writes through
``edge_index.numpy()``) and DGL's in-place ``add_edges``/``remove_edges``.  For larger graphs
such hidden edits are not seen: call :func:`forget_graph` after them, or pass a new tensor.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

from zoo._dgl import check_dgl_supported, is_dgl_graph
from zoo._names import normalize_name, unknown_name_error

SELF_LOOP_POLICIES = ("add", "keep", "remove")
GraphLike = Union[Tensor, Any]  # (2, E) LongTensor | sparse (N, N) adjacency | torch_geometric Data | dgl.DGLGraph


def self_loop_policy(value: Any) -> str:
    """``value`` as one of :data:`SELF_LOOP_POLICIES`, names normalised like every other option
    (``"Add"``, ``" keep "``); anything else fails with one line listing the choices."""
    if isinstance(value, str) and value in SELF_LOOP_POLICIES:
        return value
    if not isinstance(value, str):
        raise TypeError(f"self_loops must be one of {', '.join(SELF_LOOP_POLICIES)}, got {value!r} "
                        f"({type(value).__name__})")
    key = normalize_name(value)
    if key not in SELF_LOOP_POLICIES:
        raise unknown_name_error("self_loops policy", value, SELF_LOOP_POLICIES)
    return key


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


#: Graphs with at most this many edges have their edges compared with the cached copy on every
#: call (one ``torch.equal``: linear in E, far below a forward pass); larger graphs rely on the
#: fingerprint alone (a copy would double their memory).
CONTENT_CHECK_MAX_EDGES = 1 << 21


class _Entry:
    """One cached normalisation: the fingerprint and (small graphs) the raw edges it was built from."""

    __slots__ = ("stamp", "edges", "graph")

    def __init__(self, stamp: Any, edges: Optional[Tensor], graph: "Graph") -> None:
        self.stamp, self.edges, self.graph = stamp, edges, graph


class _GraphCache:
    """Normalised graphs per input object, keyed by ``id`` (tensors cannot be dict keys: their
    ``==`` is elementwise); an entry is dropped when its object is garbage-collected."""

    def __init__(self) -> None:
        self._entries: Dict[int, Tuple[Any, Dict[Tuple[str, str], _Entry]]] = {}

    def lookup(self, obj: Any) -> Optional[Dict[Tuple[str, str], _Entry]]:
        hit = self._entries.get(id(obj))
        return hit[1] if hit is not None and hit[0]() is obj else None

    def store(self, obj: Any, key: Tuple[str, str], value: _Entry) -> None:
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

    def forget(self, obj: Any) -> None:
        entries = self.lookup(obj)
        if entries is not None:
            entries.clear()


_CACHE = _GraphCache()


#: Edge tensors whose holder promises never to edit them (:func:`owned_edges`), by id.
_OWNED: "weakref.WeakValueDictionary[int, Tensor]" = weakref.WeakValueDictionary()


def owned_edges(edge_index: Tensor) -> Tensor:
    """``edge_index`` marked as edited by nobody: its cache entry checks the fingerprint alone, with
    no per-call comparison of the edges (a comparison reads a GPU's result back on the host, so
    every forward waited for the device).  For a holder that keeps the tensor to itself, e.g. the
    training loop's own copy of a task's graph; pass a copy (``edge_index.clone()``) when others
    may hold it."""
    _OWNED[id(edge_index)] = edge_index
    return edge_index


def _is_owned(graph: Any) -> bool:
    return isinstance(graph, Tensor) and _OWNED.get(id(graph)) is graph


def forget_graph(graph: Any) -> None:
    """Drop the cached normalisations of ``graph``: needed only after editing the edges of a graph
    with more than :data:`CONTENT_CHECK_MAX_EDGES` edges in a way that bypasses torch's version
    counter (``.data`` / numpy views); smaller graphs are compared edge by edge anyway."""
    _CACHE.forget(graph)


def _tensor_stamp(t: Tensor) -> Tuple[Any, ...]:
    return t.data_ptr(), t._version, tuple(t.shape), t.dtype, str(t.device)


def _stamp(graph: GraphLike, x: Optional[Tensor]) -> Any:
    """A cheap fingerprint that changes whenever the normalised graph may change (``None``: don't cache).

    Computed before any edges are read, so a cache hit costs no tensor work beyond the
    content comparison of small graphs.
    """
    if isinstance(graph, Tensor) and graph.layout != torch.strided:
        return None  # a sparse adjacency has no single storage to fingerprint: read it every call
    if isinstance(graph, Tensor):  # the node count comes from x: part of the fingerprint
        return _tensor_stamp(graph), None if x is None else x.size(0)
    if is_dgl_graph(graph):
        # DGL's mutating methods (add_edges, remove_edges, ...) install a new graph index object:
        # the entry keeps the old one alive, so an identity test cannot be fooled by a reused id.
        return getattr(graph, "_graph", None), int(graph.num_nodes()), int(graph.num_edges())
    edge_index = getattr(graph, "edge_index", None)
    if isinstance(edge_index, Tensor):
        return id(edge_index), _tensor_stamp(edge_index), getattr(graph, "num_nodes", None)
    return None


def _same_stamp(a: Any, b: Any) -> bool:
    """Fingerprints compared with ``is`` for objects (DGL's graph index) and ``==`` for values."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_stamp(u, v) for u, v in zip(a, b))
    if isinstance(a, (int, float, str, bool, type(None), torch.dtype)):
        return type(a) is type(b) and a == b
    return a is b


def _read_edges(graph: GraphLike, x: Optional[Tensor]) -> Tuple[Tensor, int]:
    """Return (edge_index, num_nodes) for any supported graph type."""
    if isinstance(graph, Graph):
        return graph.edge_index, graph.num_nodes
    if isinstance(graph, Tensor) and graph.layout != torch.strided:
        return _sparse_edges(graph)
    if isinstance(graph, Tensor):
        if x is None:
            raise ValueError("an edge_index graph needs the node features x to know the number of nodes")
        return graph, x.size(0)
    if is_dgl_graph(graph):
        check_dgl_supported(graph)
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


def _sparse_edges(adj: Tensor) -> Tuple[Tensor, int]:
    """``(edge_index, N)`` of a sparse ``(N, N)`` adjacency (COO or CSR): an edge ``u -> v`` per stored
    entry ``adj[u, v]`` (PyG's ``to_edge_index``), in row-major order."""
    if adj.dim() != 2 or adj.size(0) != adj.size(1):
        raise ValueError(f"a sparse adjacency must be square (N, N), got shape {tuple(adj.shape)}")
    coo = (adj if adj.layout == torch.sparse_coo else adj.to_sparse_coo()).coalesce()
    values = coo.values()
    if values.numel() and not bool((values == 1).all()):
        raise ValueError("the sparse adjacency has values other than 1 (edge weights), which the zoo's layers do not "
                         "take: pass its structure (adj.coalesce().indices()) and the weights as edge_attr if the "
                         "model has an edge encoder")
    return coo.indices(), int(adj.size(0))


def _raw_edges(graph: GraphLike) -> Optional[Tensor]:
    """The input's own edges in its own order, for the content check (``None``: nothing to compare)."""
    if isinstance(graph, Tensor):
        return graph if graph.layout == torch.strided else _sparse_edges(graph)[0]
    if is_dgl_graph(graph):
        src, dst = graph.edges(order="eid")
        return torch.stack([src, dst]).long()  # as _read_edges returns them
    edge_index = getattr(graph, "edge_index", None)
    return edge_index if isinstance(edge_index, Tensor) else None


def _unchanged(entry: "_Entry", graph: GraphLike) -> bool:
    if entry.edges is None:  # a large graph: the fingerprint is all we check
        return True
    now = _raw_edges(graph)
    return now is not None and now.shape == entry.edges.shape and bool(torch.equal(now, entry.edges))


def read_edge_features(graph: GraphLike, key: Optional[str] = None) -> Optional[Tensor]:
    """The edge features stored on ``graph``, one row per edge in the graph's own edge order.

    PyG ``Data``: ``graph.edge_attr`` (or the attribute ``key``).  DGL: ``graph.edata[key]``, or
    without ``key`` the single edge-feature tensor in ``graph.edata`` (with several, ``key`` must
    name one).  ``None`` when the graph carries none (or is a bare ``edge_index``).
    """
    if is_dgl_graph(graph):
        check_dgl_supported(graph)
        edata = graph.edata
        names = sorted(str(k) for k in edata.keys())
        if key is not None:
            if key not in edata:
                raise ValueError(f"the DGL graph has no edge feature {key!r} in g.edata "
                               f"(it has {', '.join(map(repr, names)) or 'none'})")
            return edata[key]
        if len(names) > 1:
            raise ValueError(f"the DGL graph has several edge features in g.edata ({', '.join(map(repr, names))}): "
                             "name the one to use, e.g. model(g, x, edge_attr=" + repr(names[0]) + ")")
        return edata[names[0]] if names else None
    if isinstance(graph, Tensor):
        if key is not None:
            raise ValueError(f"edge_attr={key!r} names a stored edge feature, but the graph is a bare edge_index "
                             "tensor; pass the (E, edge_dim) tensor itself")
        return None
    if key is not None:
        if not hasattr(graph, key):
            raise ValueError(f"the graph has no edge feature {key!r}; pass the (E, edge_dim) tensor itself")
        return getattr(graph, key)
    return getattr(graph, "edge_attr", None)


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
    return _apply_policy_with_ids(edge_index, num_nodes, policy)[0]


def _apply_policy_with_ids(edge_index: Tensor, num_nodes: int, policy: str) -> Tuple[Tensor, Tensor]:
    """The normalised edges and, per edge, the column of ``edge_index`` it came from (-1: an added loop)."""
    ids = torch.arange(edge_index.size(1), device=edge_index.device)
    if policy == "keep":
        ei = edge_index
    else:
        keep = edge_index[0] != edge_index[1]
        ei, ids = edge_index[:, keep], ids[keep]
        if policy == "add":
            loops = torch.arange(num_nodes, device=ei.device).expand(2, num_nodes)
            ei = torch.cat([ei, loops], dim=1)
            ids = torch.cat([ids, ids.new_full((num_nodes,), -1)])
    # Sorting by destination keeps every node's incoming edges contiguous (better scatter locality).
    order = torch.argsort(ei[1] * num_nodes + ei[0], stable=True)
    return ei[:, order].contiguous(), ids[order]


def input_edge_ids(graph: GraphLike, x: Optional[Tensor] = None, self_loops: str = "add") -> Tensor:
    """For each edge of the normalised graph (``as_graph(graph, x, self_loops).edge_index``, the
    order of ``AttentionRecord.alpha``), the id of the input edge it came from — its column in an
    ``edge_index``, its DGL edge id — or ``-1`` for a self-loop the ``"add"`` policy inserted.

    Shapes: ``(E,)`` long.  Scatter per-edge results back to the input's edges with
    ``out[ids[ids >= 0]] = alpha[ids >= 0]`` (``docs/dgl.md``).
    """
    self_loops = self_loop_policy(self_loops)
    edge_index, num_nodes = _read_edges(graph, x)
    _validate(edge_index, num_nodes)
    return _apply_policy_with_ids(edge_index.long(), num_nodes, self_loops)[1]


def as_graph(graph: GraphLike, x: Optional[Tensor] = None, self_loops: str = "add") -> Graph:
    """Validate ``graph`` and return the normalised :class:`Graph` for ``self_loops`` (cached).

    Raises:
        ValueError: malformed ``edge_index``, indices out of range, or ``x`` with a number of
            rows different from the number of nodes.
    """
    self_loops = self_loop_policy(self_loops)
    if isinstance(graph, Graph) and graph.self_loops == self_loops:
        result = graph
    else:
        device = x.device if x is not None else None
        key = (self_loops, str(device))
        stamp = _stamp(graph, x)
        entries = _CACHE.lookup(graph) if stamp is not None else None
        hit = entries.get(key) if entries is not None else None
        if hit is not None and _same_stamp(hit.stamp, stamp) and _unchanged(hit, graph):
            result = hit.graph
        else:
            edge_index, num_nodes = _read_edges(graph, x)
            _validate(edge_index, num_nodes)
            ei = edge_index.long()
            if device is not None:
                ei = ei.to(device)
            result = Graph(_apply_policy(ei, num_nodes, self_loops), num_nodes, self_loops)
            if stamp is not None:
                # _validate: (2, E); a caller's own never-edited edges need no comparison
                small = edge_index.size(1) <= CONTENT_CHECK_MAX_EDGES and not _is_owned(graph)
                _CACHE.store(graph, key, _Entry(stamp, edge_index.clone() if small else None, result))
    if x is not None and x.size(0) != result.num_nodes:
        raise ValueError(
            f"node features have {x.size(0)} rows but the graph has {result.num_nodes} nodes; "
            "x must have one row per node"
        )
    return result
