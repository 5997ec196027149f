"""Fixed Aggregation Features + MLP (Rubio-Madrigal & Burkholz, "Fixed Aggregation Features Can
Rival GNNs", ICML 2026, arXiv:2601.19449; code ``celrm/fixed-aggregation-features``).

The graph enters only through training-free aggregations of the raw features, concatenated into
one table that an MLP classifies: the baseline that tells whether attention and depth earn
their cost.
"""
from __future__ import annotations

import weakref
from typing import Any, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn

from zoo._names import normalize_name, unknown_name_error
from zoo.graph import Graph, GraphLike, as_graph, self_loop_policy
from zoo.nn.base import AttentionRecord
from zoo.nn.model import GraphModel
from zoo.nn.validation import check_node_features, positive_int, probability
from zoo.ops.dropout import dropout
from zoo.ops.segment import gather_rows, segment_sum
from zoo.registry import register_model

#: fixed reducers: the text's ``mean`` over ``N(v)``; ``gcn`` is the code's ``mean_agg``
#: (``_norm_mean_step``: ``1 / sqrt(d_u d_v)`` weights, degrees counted at the source)
REDUCERS = ("mean", "gcn", "sum", "max", "min", "std")
FAF_NORMS = ("none", "layernorm", "batchnorm")


def reduce_step(graph: Graph, h: Tensor, reducer: str) -> Tensor:
    """One hop: ``r{h_u : u in N(v)}`` for every node ``v`` (nodes without in-edges get 0)."""
    n, src, dst = graph.num_nodes, graph.src, graph.dst
    msgs = gather_rows(h, src)
    if reducer in ("mean", "sum", "std"):
        total = segment_sum(msgs, dst, n)
        if reducer == "sum":
            return total
        count = segment_sum(torch.ones_like(src, dtype=h.dtype), dst, n).clamp_min(1).unsqueeze(-1)
        mean = total / count
        if reducer == "mean":
            return mean
        second = segment_sum(msgs * msgs, dst, n) / count
        return (second - mean * mean).clamp_min(0).sqrt()
    if reducer == "gcn":
        deg = segment_sum(torch.ones_like(src, dtype=h.dtype), src, n).clamp_min(1)
        coef = (deg.index_select(0, src) * deg.index_select(0, dst)).rsqrt().unsqueeze(-1)
        return segment_sum(coef * msgs, dst, n)
    op = "amax" if reducer == "max" else "amin"
    out = h.new_zeros(n, h.size(1))
    return out.scatter_reduce(0, dst.unsqueeze(-1).expand_as(msgs), msgs, op, include_self=False)


class FixedAggregation(nn.Module):
    r"""Training-free multi-hop aggregation features (no parameters).

    .. math::
        h^{(0,r)}_v = x_v,\qquad h^{(k,r)}_v = r\big\{h^{(k-1,r)}_u : u \in \mathcal N(v)\big\},\qquad
        z_v = x_v \,\Big\Vert\, \big\Vert_{r \in R} \big\Vert_{k=1}^{K} h^{(k,r)}_v

    for the reducers ``R`` (``mean``, ``sum``, ``max``, ``min``, ``std``; ``gcn`` =
    :math:`\sum_u h_u / \sqrt{d_u d_v}`, what the authors' ``mean_agg`` computes) over ``K`` hops,
    neighbourhoods after the self-loop policy (the code: undirected, one self-loop per node).

    Shapes:
        x: ``(N, F)`` -> z: ``(N, F (1 + K |R|))``.
    """

    def __init__(self, hops: int, reducers: Sequence[str]) -> None:
        super().__init__()
        self.hops, self.reducers = hops, tuple(reducers)
        self._cache: Optional[Tuple[Any, Any, int, Tensor]] = None

    def forward(self, graph: Graph, x: Tensor) -> Tensor:
        # The features depend only on (graph, x): one computation per graph and feature tensor,
        # reused by every epoch (and every stacked replica) while both are alive and unedited.
        c = self._cache
        if c is not None and c[0]() is graph and c[1]() is x and c[2] == x._version:
            return c[3]
        with torch.no_grad():
            parts = [x]
            for reducer in self.reducers:
                h = x
                for _ in range(self.hops):
                    h = reduce_step(graph, h, reducer)
                    parts.append(h)
            z = torch.cat(parts, dim=-1)
        self._cache = (weakref.ref(graph), weakref.ref(x), x._version, z)
        return z

    def extra_repr(self) -> str:
        return f"hops={self.hops}, reducers={self.reducers}"


class FAFClassifier(nn.Module):
    r"""The MLP on the fixed features (the authors' ``FAFMLP``).

    .. math::
        u^{0} = \mathrm{N}_0(z),\qquad
        u^{l} = \mathrm{ReLU}\big(\mathrm{N}_l(W_l\, \mathrm{drop}(u^{l-1}) + b_l)\big)\ (l < L),\qquad
        y = W_L\, \mathrm{drop}(u^{L-1}) + b_L

    with ``N`` the optional norm (LayerNorm or BatchNorm over nodes; ``N_0`` on the input table).

    Shapes:
        z: ``(N, in_dim)`` -> ``(N, out_dim)``.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, norm: str) -> None:
        super().__init__()
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        make = {"none": lambda d: nn.Identity(), "layernorm": nn.LayerNorm, "batchnorm": nn.BatchNorm1d}[norm]
        self.input_norm = make(in_dim)
        self.hidden_norms = nn.ModuleList(make(hidden_dim) for _ in range(num_layers - 1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights and zero biases (the authors' ``reset_parameters``)."""
        for lin in self.linears:
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)
        for norm in [self.input_norm, *self.hidden_norms]:
            if hasattr(norm, "reset_parameters"):
                norm.reset_parameters()


@register_model("faf_mlp", aliases=("faf", "fixed_aggregation_mlp"))
class FAFMLP(GraphModel):
    """An MLP on fixed aggregation features (:class:`FixedAggregation` then :class:`FAFClassifier`).

    Args:
        in_dim: raw feature width ``F``.
        out_dim: outputs (classes).
        hidden_dim: the MLP's hidden width.
        num_layers: the MLP's linear layers (``mlp_layers`` in the authors' scripts; >= 1).
        hops: aggregation hops ``K`` (the scripts' ``local_layers``).
        reducers: the fixed reducers ``R`` (default ``["mean"]``: "often using only mean aggregation").
        norm: ``none``, ``layernorm`` (``--ln``) or ``batchnorm`` (``--bn``) on the input table and
            after every hidden linear layer.
        dropout: dropout before every linear layer.
        self_loops: the aggregation neighbourhoods' self-loop policy (default ``add``: the code's
            ``remove_self_loops`` then ``add_self_loops``).
    """

    family = "faf"
    conservation_law_exception: Optional[str] = (
        "an MLP on fixed aggregation features has no message-passing layers: the balance paper's rescaling "
        "symmetry and its LayerProtocol groups do not describe it"
    )
    attention_normalized = False
    supports_heads = False

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 2, *, hops: int = 2,
                 reducers: Union[str, Sequence[str]] = ("mean",), norm: str = "none", dropout: float = 0.0,
                 self_loops: str = "add") -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("hidden_dim", hidden_dim),
                            ("num_layers", num_layers), ("hops", hops)):
            positive_int(name, value)
        names = [reducers] if isinstance(reducers, str) else list(reducers)
        for r in names:
            if normalize_name(r) not in REDUCERS:
                raise unknown_name_error("reducer", r, REDUCERS)
        if not names or len(set(map(normalize_name, names))) != len(names):
            raise ValueError(f"reducers must name each reducer once, at least one; got {reducers!r}")
        norm = normalize_name(norm)
        if norm not in FAF_NORMS:
            raise unknown_name_error("faf_mlp norm", norm, FAF_NORMS)
        self._init_model(num_layers, {})
        self.in_dim, self.out_dim, self.hidden_dim = in_dim, out_dim, hidden_dim
        self.hops, self.reducers, self.norm = hops, tuple(normalize_name(r) for r in names), norm
        self.dropout = probability("dropout", dropout)
        self.self_loops = self_loop_policy(self_loops)
        self.features = FixedAggregation(hops, self.reducers)
        self.mlp = FAFClassifier(in_dim * (1 + hops * len(self.reducers)), hidden_dim, out_dim, num_layers, norm)

    def forward(self, graph: GraphLike, x: Tensor,
                return_attention: bool = False) -> Union[Tensor, Tuple[Tensor, List[AttentionRecord]]]:
        """Shapes: ``x`` ``(N, in_dim)`` -> ``(N, out_dim)``; with ``return_attention`` one record per
        linear layer, all zeros (an MLP gives no edge coefficients)."""
        check_node_features(self, x, self.in_dim)
        g = as_graph(graph, x, self.self_loops)
        h = self.mlp.input_norm(self.features(g, x))
        mlp = self.mlp
        for index, lin in enumerate(mlp.linears):
            h = lin(dropout(h, self.dropout, self.training))
            if index < self.num_layers - 1:
                h = torch.relu(mlp.hidden_norms[index](h))
            h = self.taps[index](h)
        if not return_attention:
            return h
        zeros = x.new_zeros(g.num_edges, 1)
        return h, [AttentionRecord(g.edge_index, zeros) for _ in range(self.num_layers)]

    def extra_repr(self) -> str:
        return (f"in_dim={self.in_dim}, hidden_dim={self.hidden_dim}, out_dim={self.out_dim}, "
                f"num_layers={self.num_layers}, hops={self.hops}, reducers={self.reducers}, norm={self.norm!r}")
