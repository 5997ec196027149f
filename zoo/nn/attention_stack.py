"""``AttentionStack``: the base class of the transformer-style families (graph / universal
transformer, SAN), the counterpart of :class:`zoo.nn.DeepGNN` for models whose blocks own their
residuals and norms: an encoder, ``num_layers`` blocks, a decoder."""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

from torch import Tensor, nn

from zoo.graph import Graph, GraphLike, as_graph
from zoo.nn.base import AttentionRecord
from zoo.nn.model import GraphModel
from zoo.nn.validation import check_node_features


class AttentionStack(GraphModel):
    """Encoder -> ``num_layers`` blocks -> decoder, with the model protocol the zoo's tools use
    (:class:`zoo.nn.model.GraphModel`).  Subclasses set ``layers`` and implement :meth:`encode` /
    :meth:`decode`; their blocks own their options (constructor arguments).

    Each block maps ``(graph, h)`` to ``(h', alpha)`` with ``h`` ``(N, hidden_dim)`` and ``alpha``
    ``(E, heads)``; :meth:`block` picks the block of a layer index (shared weights: always one).
    Each node attends to its neighbourhood plus itself (``default_self_loops = "add"``).
    """

    conservation_law_exception: Optional[str] = (
        "dot-product attention is quadratic in the features and LayerNorm / residual blocks are not "
        "positively homogeneous: the balance paper's rescaling symmetry (Thm. 2.2) does not hold"
    )
    layers: nn.ModuleList

    def _init_stack(self, num_layers: int) -> None:
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self._init_model(num_layers, {})
        self.self_loops = self.default_self_loops

    def block(self, index: int) -> nn.Module:
        return self.layers[index]

    def encode(self, graph: Graph, x: Tensor) -> Tensor:
        raise NotImplementedError

    def decode(self, h: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, graph: GraphLike, x: Tensor,
                return_attention: bool = False) -> Union[Tensor, Tuple[Tensor, List[AttentionRecord]]]:
        """Shapes: ``x`` ``(N, in_dim)`` -> ``(N, out_dim)``; with ``return_attention`` also one
        :class:`AttentionRecord` per applied layer."""
        check_node_features(self, x, self.in_dim)
        g = as_graph(graph, x, self.self_loops)
        h = self.encode(g, x)
        records: List[AttentionRecord] = []
        for index in range(self.num_layers):
            if index not in self.skipped_layers:
                h, alpha = self.block(index)(g, h)
                if return_attention:
                    records.append(AttentionRecord(g.edge_index, alpha))
            h = self.taps[index](h)
        out = self.decode(h)
        return (out, records) if return_attention else out


__all__ = ["AttentionStack"]
