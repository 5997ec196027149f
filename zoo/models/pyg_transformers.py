"""Graph transformers for larger graphs, from PyG (wrapped, not copied): Polynormer and SGFormer.

Both run PyG's own modules (``torch_geometric.nn.models.Polynormer`` / ``SGFormer``, PyG >= 2.7)
on the zoo's graph: the wrapper turns the graph into the ``edge_index`` PyG expects (after the
self-loop policy), gives node tasks one batch, hands back logits (PyG returns log-probabilities;
for one output, the binary tasks' logit ``log p_1 - log p_0`` of a two-class module) and the model
protocol the zoo's tools use (``num_layers``, ``taps``, ``return_attention``).

Not covered: the balanced inits (their attention and norms break the balance paper's rescaling
symmetry; ``conservation_law_exception``), the zoo's per-replica dropout streams (PyG's modules
draw ``F.dropout`` from torch's generator, so a stacked replica's numbers depend on its group)
and attention records (PyG's layers do not return coefficients: the records are zeros).
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from zoo.graph import GraphLike, as_graph
from zoo.nn.base import AttentionRecord
from zoo.nn.model import GraphModel
from zoo.nn.validation import check_node_features, positive_int, probability
from zoo.registry import register_model

_EXCEPTION = ("linear global attention with LayerNorm / BatchNorm between blocks is not positively homogeneous: the "
              "balance paper's rescaling symmetry (Thm. 2.2) does not hold, so the balanced inits do not apply")


class Unused(nn.Module):
    """Stands in for a PyG sub-module this configuration never calls (no parameters to leave untrained)."""

    def reset_parameters(self) -> None:
        pass


class PyGNodeModel(GraphModel):
    """The shared wrapper: graph -> ``edge_index``, one batch, logits, the zoo's model protocol.

    Args:
        in_dim: input feature width.
        out_dim: outputs (classes; 1: one logit for a binary task).
        norm: only ``"none"`` (PyG's module keeps its own LayerNorm / BatchNorm).
    """

    conservation_law_exception: Optional[str] = _EXCEPTION
    #: PyG's dense batching writes in place (``to_dense_batch``, SGFormer's attention): not under
    #: ``torch.func.vmap``; the trainer runs such replicas one at a time (same numbers, no stacking)
    vmap_safe = False
    attention_normalized = False
    #: float64 forwards work (SGFormer's PyG attention builds a float32 tensor: False there)
    float64_safe = True
    pyg: nn.Module

    def _protocol(self, in_dim: int, out_dim: int, num_layers: int, norm: Any) -> int:
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("num_layers", num_layers)):
            positive_int(name, value)
        if norm not in (None, "none"):
            raise ValueError(f"{type(self).__name__} keeps PyG's own LayerNorm / BatchNorm; a norm plugin "
                             f"({norm!r}) has no place in it: drop norm")
        self._init_model(num_layers, {})
        self.in_dim, self.out_dim = in_dim, out_dim
        # PyG's GCNConv / GATConv add the self-loops they lack: no policy of ours would change their graph
        self.self_loops = self.default_self_loops
        return max(out_dim, 2)  # a one-logit task trains a two-class module (see the module docstring)

    def forward(self, graph: GraphLike, x: Tensor,
                return_attention: bool = False) -> Union[Tensor, Tuple[Tensor, List[AttentionRecord]]]:
        """Shapes: ``x`` ``(N, in_dim)`` -> ``(N, out_dim)`` logits; records of zeros with ``return_attention``."""
        check_node_features(self, x, self.in_dim)
        if x.dtype == torch.float64 and not self.float64_safe:
            raise ValueError(f"{type(self).__name__} runs in float32 only (PyG's attention mixes in a float32 "
                             "tensor); use dtype float32")
        g = as_graph(graph, x, self.self_loops)
        if g.num_nodes == 0:  # PyG's dense batching reads batch.max(), which an empty batch lacks
            logp = x.new_zeros(0, max(self.out_dim, 2))
        else:
            logp = self.pyg(x, g.edge_index, torch.zeros(g.num_nodes, dtype=torch.long, device=x.device))
        out = logp[:, 1:2] - logp[:, 0:1] if self.out_dim == 1 else logp
        if not return_attention:
            return out
        zeros = x.new_zeros(g.num_edges, 1)
        return out, [AttentionRecord(g.edge_index, zeros) for _ in range(self.num_layers)]


@register_model("polynormer")
class Polynormer(PyGNodeModel):
    r"""Polynormer (Deng, Yue, Zhang, ICLR 2024, arXiv:2403.01232) as PyG implements it.

    .. math::
        x \leftarrow (1 - \beta)\,\mathrm{LN}\big(\mathrm{ReLU}(H x) \odot \mathrm{drop}(\mathrm{ReLU}(\mathrm{BN}(\mathrm{GCN}(x) + W x)))\big)
        + \beta\, \mathrm{drop}(\mathrm{ReLU}(\mathrm{BN}(\mathrm{GCN}(x) + W x)))

    for ``num_layers`` local layers (``GAT`` with ``local_attn``), summed; then ``global_layers``
    linear global attention layers on their LayerNorm (``global_attention=True``) and a linear
    head (``pred_global``; without global attention ``pred_local`` reads the local sum).

    Shapes:
        x: ``(N, in_dim)`` -> ``(N, out_dim)``.

    Args:
        hidden_dim: each head's width (``hidden_channels``; blocks are ``heads * hidden_dim`` wide).
        num_layers: local layers (``local_layers``).
        global_layers: linear global attention layers (PyG's ``global_layers``).
        heads: attention heads of the local (and global) layers; > 1 only with ``global_attention=False``.
        in_dropout: dropout on the input features.
        dropout: dropout inside the local layers.
        global_dropout: dropout inside the global layers.
        beta: the local layers' mix of the polynomial (gated) term and the linear term (``beta`` above).
        qk_shared: share the global attention's query and key maps.
        pre_ln: LayerNorm on each local layer's input.
        post_bn: BatchNorm on each local layer's output (``BN`` above).
        local_attn: GAT attention in the local layers (``False``: GCN-style propagation).
        global_attention: use the global layers from the first epoch (the paper trains local
            layers first, then switches; PyG's ``_global`` flag); ``False``: local layers only.
    """

    family = "polynormer"
    supports_heads = False  # PyG's global attention is hidden_dim wide: heads > 1 only with global_attention=False

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 7, *,
                 global_layers: int = 2, heads: int = 1, in_dropout: float = 0.15, dropout: float = 0.5,
                 global_dropout: float = 0.5, beta: float = 0.9, qk_shared: bool = False, pre_ln: bool = False,
                 post_bn: bool = True, local_attn: bool = False, global_attention: bool = True, norm: Any = None) -> None:
        super().__init__()
        from torch_geometric.nn.models import Polynormer as PyGPolynormer

        classes = self._protocol(in_dim, out_dim, num_layers, norm)
        positive_int("hidden_dim", hidden_dim)
        positive_int("heads", heads)
        positive_int("global_layers", global_layers)
        if heads > 1 and global_attention:
            raise ValueError(f"polynormer: heads={heads} with global_attention: PyG's Polynormer builds its global "
                             "attention for hidden_dim features but feeds it heads * hidden_dim; use heads=1, or "
                             "global_attention=False for local layers only")
        self.hidden_dim, self.heads, self.global_attention = hidden_dim, heads, bool(global_attention)
        self.in_dropout, self.dropout, self.global_dropout = (
            probability("in_dropout", in_dropout), probability("dropout", dropout),
            probability("global_dropout", global_dropout))
        self.pyg = PyGPolynormer(in_dim, hidden_dim, classes, local_layers=num_layers, global_layers=global_layers,
                                 in_dropout=in_dropout, dropout=dropout, global_dropout=global_dropout, heads=heads,
                                 beta=beta, qk_shared=qk_shared, pre_ln=pre_ln, post_bn=post_bn,
                                 local_attn=local_attn)
        self.pyg._global = self.global_attention
        self.pyg.lin_in = Unused()  # built but never called by PyG's forward
        if self.global_attention:
            self.pyg.pred_local = Unused()
        else:
            self.pyg.global_attn, self.pyg.pred_global, self.pyg.ln = nn.ModuleList(), Unused(), Unused()


@register_model("sgformer")
class SGFormer(PyGNodeModel):
    r"""SGFormer (Wu et al., NeurIPS 2023, arXiv:2306.10759) as PyG implements it.

    .. math::
        y = W_o\big(w\, \mathrm{GNN}(X) + (1 - w)\, \mathrm{SGAttn}(X)\big)

    with a ``num_layers``-layer GCN branch (linear input map, BatchNorm, ReLU, dropout, residual
    to the previous layer) and ``trans_num_layers`` simplified global attention layers (linear in
    ``N``, LayerNorm, residual averaging), ``w = graph_weight`` (``aggregate="cat"`` concatenates).

    Shapes:
        x: ``(N, in_dim)`` -> ``(N, out_dim)``.

    Args:
        hidden_dim: the width of both branches (``hidden_channels``).
        num_layers: GCN layers of the graph branch (``gnn_num_layers``).
        trans_num_layers: simplified global attention layers.
        trans_num_heads: heads of the global attention.
        trans_dropout: dropout in the global attention branch.
        gnn_dropout: dropout in the GCN branch.
        graph_weight: ``w``, the GCN branch's weight in the sum (``aggregate="add"``).
        aggregate: ``add`` (the weighted sum above) or ``cat`` (the two branches concatenated).
    """

    family = "sgformer"
    supports_heads = False
    #: PyG's ``SGFormerAttention`` builds a float32 ``ones`` tensor into its einsum: float32 only
    float64_safe = False

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 3, *,
                 trans_num_layers: int = 2, trans_num_heads: int = 1, trans_dropout: float = 0.5,
                 gnn_dropout: float = 0.5, graph_weight: float = 0.5, aggregate: str = "add", norm: Any = None) -> None:
        super().__init__()
        from torch_geometric.nn.models import SGFormer as PyGSGFormer

        classes = self._protocol(in_dim, out_dim, num_layers, norm)
        positive_int("hidden_dim", hidden_dim)
        positive_int("trans_num_layers", trans_num_layers)
        positive_int("trans_num_heads", trans_num_heads)
        if aggregate not in ("add", "cat"):
            raise ValueError(f"sgformer aggregate must be 'add' or 'cat', got {aggregate!r}")
        self.hidden_dim = hidden_dim
        self.trans_dropout, self.gnn_dropout = probability("trans_dropout", trans_dropout), probability(
            "gnn_dropout", gnn_dropout)
        self.pyg = PyGSGFormer(in_dim, hidden_dim, classes, trans_num_layers=trans_num_layers,
                               trans_num_heads=trans_num_heads, trans_dropout=trans_dropout,
                               gnn_num_layers=num_layers, gnn_dropout=gnn_dropout, graph_weight=graph_weight,
                               aggregate=aggregate)
