"""GATDB and GATNB (Oxford GAT report §4.3-4.4): GAT with learnt per-edge or per-node score biases."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

from zoo.graph import Graph
from zoo.models.gat import GAT, GATLayer, glorot_
from zoo.nn.model import LeakyScoreOptions
from zoo.registry import register_model


class _TiedBiasGATLayer(GATLayer):
    """A GAT layer with a learnt bias inside the LeakyReLU that belongs to one graph.

    The bias is created (zero) on the first call, sized by that graph; calling the layer on a
    different graph raises, since biases of one graph's edges mean nothing on another's.

    With ``edge_dim`` the score also gets an edge-feature term ``a_e^T W_e f_uv`` inside the
    LeakyReLU, as PyG's ``GATConv(edge_dim=...)`` (``W_e``: ``(heads * channels, edge_dim)``,
    ``a_e``: ``(heads, channels)``); ``forward(graph, x, edge_attr)`` with ``edge_attr``
    ``(E, edge_dim)`` aligned with ``graph.edge_index``.
    """

    bias_on = "edges"  # or "nodes"

    def __init__(self, *args: Any, epsilon: float = 1.0, edge_dim: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epsilon = epsilon
        width = self.heads * self.channels
        self.lin_edge = nn.Linear(edge_dim, width, bias=False) if edge_dim else None
        self.att_edge = nn.Parameter(torch.empty(self.heads, self.channels)) if edge_dim else None
        self._edge_attr: Optional[Tensor] = None
        if edge_dim:  # (only then: without an edge term the random stream stays GAT's)
            self._reset_edge_parameters()
        self.xi = UninitializedParameter()
        self.register_buffer("tied_edge_index", None)
        self._tied_to: Optional[Graph] = None

    def _check_or_tie(self, graph: Graph) -> None:
        if self._tied_to is graph:
            return
        if isinstance(self.xi, UninitializedParameter):
            rows = graph.num_edges if self.bias_on == "edges" else graph.num_nodes
            self.xi.materialize((rows, self.heads), device=graph.device)
            with torch.no_grad():
                self.xi.zero_()
            self.tied_edge_index = graph.edge_index.clone()
        elif not (
            self.tied_edge_index.shape == graph.edge_index.shape
            and torch.equal(self.tied_edge_index.to(graph.device), graph.edge_index)
        ):
            n_tied = int(self.tied_edge_index.max()) + 1 if self.tied_edge_index.numel() else 0
            raise ValueError(
                f"{type(self).__name__[:-5].lower()} learns one attention bias per "
                f"{'edge' if self.bias_on == 'edges' else 'node'} of the graph it was first called on "
                f"(~{n_tied} nodes, {self.tied_edge_index.size(1)} edges); it was now called on a different graph "
                f"({graph.num_nodes} nodes, {graph.num_edges} edges). It is a transductive model: build a new "
                "model for each graph."
            )
        self._tied_to = graph

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if getattr(self, "lin_edge", None) is not None:  # GATLayer.__init__ calls this before they exist
            self._reset_edge_parameters()

    def _reset_edge_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin_edge.weight)
        glorot_(self.att_edge, 1, self.heads * self.channels)

    def forward(self, graph: Graph, x: Tensor, edge_attr: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        if (edge_attr is None) != (self.lin_edge is None):
            raise ValueError("edge_attr must be given exactly when the layer has an edge term (edge_dim)")
        self._edge_attr = edge_attr  # read by score_bias, inside GATLayer.forward
        try:
            return super().forward(graph, x)
        finally:
            self._edge_attr = None

    def score_bias(self, graph: Graph) -> Tensor:
        self._check_or_tie(graph)
        xi = self.xi if self.bias_on == "edges" else self.xi.index_select(0, graph.src)
        bias = self.epsilon * xi
        if self._edge_attr is not None:
            edge = self.lin_edge(self._edge_attr).view(-1, self.heads, self.channels)
            bias = bias + (edge * self.att_edge).sum(-1)
        return bias

    # the edge term rescales like the node terms: W_e rows with the incoming side, a_e inversely
    def incoming_params(self) -> List[Tensor]:
        return super().incoming_params() + ([self.lin_edge.weight] if self.lin_edge is not None else [])

    def attention_params(self) -> List[Tensor]:
        return super().attention_params() + ([self.att_edge] if self.att_edge is not None else [])

    def bias_params(self) -> List[Tensor]:
        return super().bias_params() + [self.xi]  # the score biases: outside the symmetry (the score is invariant)


class GATDBLayer(_TiedBiasGATLayer):
    r"""GAT with Dynamic Biases: a learnt scalar per edge (and head) inside the LeakyReLU.

    .. math::
        e_{uv} = \mathrm{LeakyReLU}\big(a_s^\top W h_u + a_t^\top W h_v + \varepsilon\,\xi_{uv}\big)

    ``xi`` starts at zero (plain GAT at initialisation); :math:`\alpha_{uv}` and :math:`h'_v` are
    those of :class:`~zoo.models.gat.GATLayer`.  Report Theorem 2: the attention is dynamic.

    Shapes:
        as :class:`~zoo.models.gat.GATLayer`; xi: ``(E, heads)`` for the edges of the graph of the
        first call (after the self-loop policy).
    """

    bias_on = "edges"


class GATNBLayer(_TiedBiasGATLayer):
    r"""GAT with Node Biases: a learnt scalar per *key* node ``u`` (and head).

    .. math::
        e_{uv} = \mathrm{LeakyReLU}\big(a_s^\top W h_u + a_t^\top W h_v + \varepsilon\,\xi_u\big)

    ``xi`` starts at zero.  Report Theorem 3: still static — the key maximising
    ``a_s^T W h_u + xi_u`` wins for every query.

    Shapes:
        as :class:`~zoo.models.gat.GATLayer`; xi: ``(N, heads)`` for the nodes of the graph of the
        first call.
    """

    bias_on = "nodes"


@dataclass(frozen=True)
class TiedBiasOptions(LeakyScoreOptions):
    """Options of a GATDB / GATNB layer.

    Args:
        epsilon: the scale of the learnt biases in the score (the report's best value, 1, by default).
    """

    epsilon: float = 1.0


class _TiedBiasGAT(GAT):
    graph_tied = True
    supports_edge_features = True
    options_class = TiedBiasOptions

    def make_layer(self, index, in_dim, channels, heads, concat, *, score_norm=None, options):
        return self.layer_class(in_dim, channels, heads, concat, options.negative_slope, options.attn_dropout,
                                self.bias, score_norm, epsilon=options.epsilon, edge_dim=self.edge_dim)


@register_model("gatdb")
class GATDB(_TiedBiasGAT):
    """Deep GATDB (per-edge score biases ``epsilon * xi_uv``, zero-initialised, tied to one graph)."""

    family = "gatdb"
    layer_class = GATDBLayer


@register_model("gatnb")
class GATNB(_TiedBiasGAT):
    """Deep GATNB (per-node score biases ``epsilon * xi_u``, zero-initialised, tied to one graph)."""

    family = "gatnb"
    layer_class = GATNBLayer
