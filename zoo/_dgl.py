"""DGL graphs recognised without importing DGL: the model side (:mod:`zoo.graph`) and the data side
(:mod:`zoo.datasets.user`) accept a ``dgl.DGLGraph`` wherever a graph is accepted."""
from __future__ import annotations

from typing import Any


def is_dgl_graph(obj: Any) -> bool:
    """Whether ``obj`` is a DGL graph (checked by module name, so DGL is imported only when one is passed)."""
    return type(obj).__module__.split(".")[0] == "dgl" and hasattr(obj, "edges") and hasattr(obj, "num_nodes")


def check_dgl_supported(graph: Any) -> None:
    """The zoo's layers are homogeneous: one node set, one edge set, the same nodes as sources and
    destinations.  DGL blocks (message-flow graphs) and heterographs break that, and reading
    them as if they did not would pair features with the wrong nodes."""
    if getattr(graph, "is_block", False):
        raise TypeError(
            "DGL blocks (message-flow graphs from dgl.to_block or a neighbour sampler) are not supported: "
            "the zoo's layers use the same nodes as sources and destinations; pass the sampled subgraph as a "
            "homogeneous DGLGraph (e.g. dgl.node_subgraph(g, nodes)) with one feature row per node"
        )
    ntypes, etypes = list(getattr(graph, "ntypes", ["_N"])), list(getattr(graph, "canonical_etypes", [None]))
    if len(ntypes) != 1 or len(etypes) != 1:
        raise TypeError(
            f"DGL heterographs are not supported (this one has node types {ntypes} and {len(etypes)} edge "
            "type(s)): pass a homogeneous graph, e.g. dgl.to_homogeneous(g) with the features of all node types "
            "stacked in the same order, or the subgraph of one edge type (g[etype])"
        )
