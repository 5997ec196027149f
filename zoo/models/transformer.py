"""Graph transformers (Oxford ATML report "Exploring Graph Attention Networks", §3.2-3.3).

* ``graph_transformer`` — the vanilla transformer on graphs: an input linear layer, ``L``
  transformer layers (multi-head dot-product self-attention masked to each node's
  neighbourhood plus itself, then a position-wise two-layer ReLU FFN, each sublayer wrapped
  in a residual connection and a LayerNorm as in Vaswani et al.), an output linear layer, and
  Laplacian-eigenvector positional encodings (Dwivedi & Bresson 2020) added before the first layer.
* ``universal_transformer`` — the same with *one* transformer layer applied ``L`` times
  (Dehghani et al. 2018): the parameters of a one-layer model.

The pieces (:class:`GraphSelfAttention`, :class:`TransformerBlock`) are shared with the SAN family
(:mod:`zoo.models.san`); both families stack them on :class:`zoo.nn.AttentionStack`.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo._names import normalize_name, unknown_name_error
from zoo.graph import Graph
from zoo.nn.attention_stack import AttentionStack
from zoo.nn.validation import check_stack_options, resolve_block_norms
from zoo.norms.scores import DOT_PRODUCT, DotProductScores, ScoreNorm
from zoo.ops.dispatch import dropout_active, softmax_aggregate
from zoo.ops.dropout import dropout
from zoo.ops.segment import gather_rows, gathered_dot, segment_softmax, segment_sum, weighted_gather_sum
from zoo.registry import register_model

PLACEMENTS = ("post", "pre")
_DENSE_EIGH_MAX_NODES = 4096


class GraphSelfAttention(nn.Module):
    r"""Multi-head dot-product self-attention masked to the graph (SAN's message passing ``MP``).

    .. math::
        e^h_{vu} = s\,(W^h_q x_v)^\top (W^h_k x_u),\qquad
        P^h_{vu} = \operatorname{softmax}_{u \in \mathcal N(v)} e^h_{vu},\qquad
        \mathrm{MP}(X) = \big(P^1 X V^1 \,\|\, \dots \,\|\, P^H X V^H\big)\, W_o

    with ``s = 1/sqrt(channels)`` when ``scaled`` (Vaswani; SAN) and ``s = 1`` otherwise (the
    report's Eq. 8).  A ``scores`` norm plugin (LipschitzNorm, Eq. 19) replaces ``s``.
    ``nonlocal_energy`` multiplies head ``h`` by ``(1/n) ||P^h X - X||^2`` (nonlocal message
    passing, nonlocal-MP paper §4.1); ``nonlocal_norm`` picks the reading of that factor: ``"n"``
    (``1/n``, the formula of §4.1, default), ``"nd"`` (``1/(n d)``, ``d`` = the width of ``X``),
    ``"none"``, or ``"mu"``: the §2 Laplacian energy that §4.1 names, of head ``h``'s weighted
    graph, :math:`\frac1n \sum_i \mu_i |P^h X(i) - X(i)|^2` with
    :math:`\mu_i = e^{e_{ii}} + \sum_{l \in \mathcal N_i} e^{e_{il}}` (§2: "P^k is an aggregation
    matrix on the weighted graph (V, E, omega^k, mu^k)").  The paper's Table 6 is reproduced by
    none of them (``docs/differences.md``).  No biases: a key bias cannot change a softmax over keys.

    Shapes:
        x: ``(N, dim)`` -> out ``(N, dim)``; alpha ``(E, heads)`` for ``graph.edge_index``.
    """

    def __init__(self, dim: int, heads: int = 1, *, scaled: bool = True, attn_dropout: float = 0.0,
                 score_norm: Optional[ScoreNorm] = None, nonlocal_energy: bool = False,
                 nonlocal_norm: str = "n") -> None:
        super().__init__()
        self.nonlocal_norm = check_nonlocal_norm(nonlocal_norm)
        if dim % heads:
            raise ValueError(f"hidden_dim={dim} is not divisible by heads={heads}; the heads split hidden_dim evenly")
        self.dim, self.heads, self.channels = dim, heads, dim // heads
        self.scale = 1.0 / math.sqrt(self.channels) if scaled else 1.0
        self.attn_dropout, self.score_norm, self.nonlocal_energy = attn_dropout, score_norm, nonlocal_energy
        self.lin_query = nn.Linear(dim, dim, bias=False)
        self.lin_key = nn.Linear(dim, dim, bias=False)
        self.lin_value = nn.Linear(dim, dim, bias=False)
        self.lin_out = nn.Linear(dim, dim, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_out):
            nn.init.xavier_uniform_(lin.weight)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        n, src, dst = graph.num_nodes, graph.src, graph.dst
        shape = (n, self.heads, self.channels)
        query, key, value = (lin(x).view(shape) for lin in (self.lin_query, self.lin_key, self.lin_value))
        scores = gathered_dot(query, dst, key, src)  # (E, H)
        if self.score_norm is not None:
            scores = self.score_norm.normalize(DotProductScores(graph, query, key, value, scores))
        else:
            scores = scores * self.scale
        if self.nonlocal_energy and dropout_active(self.attn_dropout, self.training):
            # the factor reads the dropped-out weights, which the fused softmax-aggregation keeps inside
            alpha = segment_softmax(scores, dst, n)
            weights = dropout(alpha, self.attn_dropout, self.training)
            heads = segment_sum(weights.unsqueeze(-1) * gather_rows(value, src), dst, n)  # P^h X V^h
        else:
            heads, alpha = softmax_aggregate(scores, value, graph, attn_dropout=self.attn_dropout,
                                             training=self.training)  # P^h X V^h
            weights = alpha
        if self.nonlocal_energy:
            heads = heads * self._nonlocal_factor(x, weights, scores, src, dst, n).unsqueeze(-1)
        return self.lin_out(heads.reshape(n, self.dim)), alpha

    def _nonlocal_factor(self, x: Tensor, weights: Tensor, scores: Tensor, src: Tensor, dst: Tensor,
                         n: int) -> Tensor:
        """Per-head energy ``(H,)`` in front of ``P^h X V^h`` (nonlocal message passing, §4.1)."""
        # P^h X V^h = P^h (X V^h), so only the energy needs P^h X.
        px = weighted_gather_sum(weights, x, src, dst, n)  # (N, H, dim)
        per_node = (px - x.unsqueeze(1)).pow(2).sum(-1)  # (N, H): |P^h X(i) - X(i)|^2
        if self.nonlocal_norm == "mu":
            # §2's Laplacian energy on head h's weighted graph: omega_ij = exp(e_ij) and the measure
            # mu_i = exp(e_ii) + sum_l exp(e_il), the softmax denominator (self-loops included); it is
            # the measure itself, not a ratio, so no max-shift can keep it finite past exp(88) in float32.
            mu = segment_sum(scores.exp(), dst, n)  # (N, H)
            return (mu * per_node).sum(0) / n
        energy = per_node.sum(0)
        if self.nonlocal_norm != "none":
            energy = energy / (n * (self.dim if self.nonlocal_norm == "nd" else 1))
        return energy


class TransformerBlock(nn.Module):
    r"""One transformer layer: attention and a position-wise FFN, each with a residual and a norm.

    .. math::
        \text{post:}\quad Y = \mathrm{N}_1(X + \mathrm{MP}(X)),\quad X' = \mathrm{N}_2(Y + \mathrm{FFN}(Y))

        \text{pre:}\quad Y = X + \mathrm{MP}(\mathrm{N}_1(X)),\quad X' = Y + \mathrm{FFN}(\mathrm{N}_2(Y))

        \text{post, residual = none:}\quad Y = \mathrm{N}_1(\mathrm{MP}(X)),\quad X' = \mathrm{N}_2(\mathrm{FFN}(Y))

    ``FFN(Y) = ReLU(Y W_1 + b_1) W_2 + b_2``; ``N`` is LayerNorm unless a feature norm plugin
    (e.g. PairNorm) is given; ``dropout`` acts on each sublayer's output before the residual.
    ``residual = "none"`` (post placement only; an option of the graph transformers, not of SAN)
    drops both skips: the block of the Oxford report's code (github samuelbarrett1234/atml-group-11,
    ``Layer_VanillaTransformer``), where its text follows Vaswani et al.

    Shapes: x ``(N, dim)`` -> ``(N, dim)``; alpha ``(E, heads)``.
    """

    def __init__(self, dim: int, heads: int, ffn_dim: int, *, placement: str = "post", dropout: float = 0.0,
                 attn_dropout: float = 0.0, scaled: bool = True, score_norm: Optional[ScoreNorm] = None,
                 feature_norm: Any = None, nonlocal_energy: bool = False, nonlocal_norm: str = "n",
                 residual: str = "identity") -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise unknown_name_error("norm placement", placement, PLACEMENTS)
        self.residual = check_block_residual(residual, placement)
        self.placement, self.dropout = placement, dropout
        self.attention = GraphSelfAttention(dim, heads, scaled=scaled, attn_dropout=attn_dropout,
                                            score_norm=score_norm, nonlocal_energy=nonlocal_energy,
                                            nonlocal_norm=nonlocal_norm)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.ReLU(), nn.Linear(ffn_dim, dim))
        make = feature_norm.make if feature_norm is not None else nn.LayerNorm
        self.norm1, self.norm2 = make(dim), make(dim)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.attention.reset_parameters()
        for lin in (self.ffn[0], self.ffn[2]):
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)
        for norm in (self.norm1, self.norm2):
            if hasattr(norm, "reset_parameters"):
                norm.reset_parameters()

    def _sub(self, module_out: Tensor) -> Tensor:
        return dropout(module_out, self.dropout, self.training)

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]:
        if self.placement == "post":
            mp, alpha = self.attention(graph, x)
            if self.residual == "none":  # the Oxford code's block: no skips
                y = self.norm1(self._sub(mp))
                return self.norm2(self._sub(self.ffn(y))), alpha
            y = self.norm1(x + self._sub(mp))
            return self.norm2(y + self._sub(self.ffn(y))), alpha
        mp, alpha = self.attention(graph, self.norm1(x))
        y = x + self._sub(mp)
        return y + self._sub(self.ffn(self.norm2(y))), alpha


BLOCK_RESIDUALS = ("identity", "none")


def check_block_residual(value: str, placement: str) -> str:
    """Validate a transformer block's skips: ``identity`` (Vaswani) or ``none`` (post placement only:
    a pre-LN block without skips never normalises its output)."""
    key = normalize_name(str(value))
    if key not in BLOCK_RESIDUALS:
        raise unknown_name_error("residual", value, BLOCK_RESIDUALS)
    if key == "none" and placement != "post":
        raise ValueError(f"residual='none' needs placement='post' (got {placement!r}): without skips a "
                         "pre-LN block's output is never normalised; use placement='post'")
    return key


NONLOCAL_NORMS = ("n", "nd", "none", "mu")


def check_nonlocal_norm(value: str) -> str:
    """Validate the factor of the nonlocal energy: ``1/n``, ``1/(n d)``, none, or ``mu`` (§2's
    measure-weighted Laplacian energy of the head's attention graph)."""
    key = normalize_name(str(value))
    if key not in NONLOCAL_NORMS:
        raise unknown_name_error("nonlocal_norm", value, NONLOCAL_NORMS)
    return key


# --------------------------------------------------------------------------- positional encodings
def _sparse_eigenvectors(edge_index: Tensor, n: int, k: int) -> Tensor:
    """Large graphs: the smallest eigenpairs by shift-invert Lanczos (scipy), components + k of them."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    from scipy.sparse.linalg import eigsh

    try:
        ei = edge_index.cpu().numpy()
    except RuntimeError as err:  # a torch.func-wrapped tensor has no storage
        raise RuntimeError(
            f"Laplacian positional encodings of a {n}-node graph are computed with scipy, which cannot run "
            "inside torch.func transforms: call the model once on this graph outside vmap/grad (the "
            "eigenvectors are cached on the graph), or use pe_dim=0"
        ) from err
    adj = sp.coo_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float64)
    deg = np.asarray(adj.sum(1)).ravel()
    inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
    lap = sp.eye(n) - sp.diags(inv_sqrt) @ adj @ sp.diags(inv_sqrt)
    comps = connected_components(adj, directed=False)[0]
    vals, vecs = eigsh(lap.tocsc(), k=min(n - 1, comps + k), sigma=-1e-3, which="LM")
    order = np.argsort(vals)
    keep = vecs[:, order][:, vals[order] > 1e-6][:, :k]
    out = np.zeros((n, k))
    out[:, : keep.shape[1]] = keep
    return torch.as_tensor(out, dtype=torch.float64)  # cast by the caller


def laplacian_eigenvectors(graph: Graph, k: int, dtype: Optional[torch.dtype] = None) -> Tensor:
    r"""The ``k`` eigenvectors of the symmetric normalised Laplacian
    :math:`I - D^{-1/2} A D^{-1/2}` with the smallest *strictly positive* eigenvalues (the
    constant-like eigenvector of every connected component is skipped), as ``(N, k)``; columns
    are zero-padded when the graph has fewer.  ``A`` is the simple undirected graph of
    ``graph`` (symmetrised, self-loops and duplicates dropped).  Computed in float64 once per
    graph and ``dtype`` (default: torch's default dtype; ``graph.cached``)."""
    dtype = dtype or torch.get_default_dtype()

    def compute() -> Tensor:
        n, ei = graph.num_nodes, graph.edge_index
        ei = ei[:, ei[0] != ei[1]]
        if n > _DENSE_EIGH_MAX_NODES:
            return _sparse_eigenvectors(ei, n, k).to(device=graph.device, dtype=dtype)
        # Torch ops (not numpy) so that this also runs inside torch.func transforms (vmap / grad).
        ones = torch.ones(ei.size(1), dtype=torch.float64, device=ei.device)
        adj = torch.zeros(n, n, dtype=torch.float64, device=ei.device).index_put((ei[0], ei[1]), ones)
        adj = ((adj + adj.T) > 0).to(torch.float64)
        deg = adj.sum(1)
        inv_sqrt = torch.where(deg > 0, deg.clamp_min(1e-12).rsqrt(), torch.zeros_like(deg))
        lap = torch.eye(n, dtype=torch.float64, device=ei.device) - inv_sqrt[:, None] * adj * inv_sqrt[None, :]
        vals, vecs = torch.linalg.eigh(lap)
        keep = vecs[:, vals > 1e-6][:, :k]
        return F.pad(keep, (0, k - keep.size(1))).to(dtype)

    return graph.cached(f"laplacian_eigenvectors:{k}", compute, dtype=dtype)


# --------------------------------------------------------------------------- models
@register_model("graph_transformer", aliases=("transformer", "vanilla_transformer"))
class GraphTransformer(AttentionStack):
    r"""Vanilla graph transformer (report §3.2).

    .. math::
        h^0 = W_{\mathrm{in}}\, x + W_{\mathrm{pe}}\, \mathrm{PE},\qquad
        \mathrm{out} = W_{\mathrm{out}}\, h^L

    with ``PE`` the ``pe_dim`` smallest non-trivial Laplacian eigenvectors (random sign flips while
    training; cached on the ``Graph``) and ``L`` :class:`TransformerBlock` s in between.

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, out_dim)``; hidden representations ``(N, hidden_dim)``.

    Args:
        in_dim, out_dim: input features and outputs.
        hidden_dim: the transformer width (all heads together).
        num_layers: transformer layers ``L``.
        heads: attention heads (splitting ``hidden_dim``).
        dropout: on the input features and on every sublayer output.
        attn_dropout: on attention coefficients.
        ffn_dim: FFN hidden width (default ``2 * hidden_dim``).
        pe_dim: number of Laplacian eigenvectors used as positional encodings (0 disables them).
        scaled: divide scores by ``sqrt(channels)`` (Vaswani); the report's Eq. 8 has no scaling (default).
        placement: ``post`` (Vaswani, default) or ``pre`` LayerNorm.
        residual: ``identity`` (each sublayer adds its input, Vaswani; default) or ``none`` (no skips,
            post placement: the report's code's block, where its text follows Vaswani).
        norm, norm_kwargs: ``lipschitz`` normalises the scores (Eq. 19); a feature norm
            (``pairnorm``, ``layernorm``) replaces the blocks' LayerNorm.
    """

    family = "transformer"
    shared_block = False
    score_kind = DOT_PRODUCT

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 64, num_layers: int = 2, *,
                 heads: int = 1, dropout: float = 0.0, attn_dropout: float = 0.0, ffn_dim: Optional[int] = None,
                 pe_dim: int = 8, scaled: bool = False, placement: str = "post", norm: Any = None,
                 norm_kwargs: Optional[Dict[str, Any]] = None, residual: str = "identity") -> None:
        super().__init__()
        check_stack_options(hidden_dim, heads, dropout, attn_dropout)
        if pe_dim < 0:
            raise ValueError(f"pe_dim must be >= 0 (0 disables positional encodings), got {pe_dim}")
        placement = normalize_name(placement)
        self.in_dim, self.out_dim, self.hidden_dim, self.heads = in_dim, out_dim, hidden_dim, heads
        self.dropout, self.pe_dim = dropout, pe_dim
        score_norm, feature_norm = resolve_block_norms(norm, norm_kwargs, self.family, self.score_kind)
        self.norm_plugin = score_norm or feature_norm
        self._init_stack(num_layers)
        self.lin_in = nn.Linear(in_dim, hidden_dim)
        self.lin_pe = nn.Linear(pe_dim, hidden_dim, bias=False) if pe_dim else None
        copies = 1 if self.shared_block else num_layers
        self.layers = nn.ModuleList(
            TransformerBlock(hidden_dim, heads, ffn_dim or 2 * hidden_dim, placement=placement, dropout=dropout,
                             attn_dropout=attn_dropout, scaled=scaled, score_norm=score_norm,
                             feature_norm=feature_norm, residual=residual)
            for _ in range(copies)
        )
        self.lin_out = nn.Linear(hidden_dim, out_dim)

    def block(self, index: int) -> nn.Module:
        return self.layers[0 if self.shared_block else index]

    def encode(self, graph: Graph, x: Tensor) -> Tensor:
        h = self.lin_in(dropout(x, self.dropout, self.training))
        if self.lin_pe is not None:
            pe = laplacian_eigenvectors(graph, self.pe_dim, x.dtype)
            if self.training:  # eigenvector signs are arbitrary: flip them at random (Dwivedi & Bresson)
                pe = pe * (torch.randint(0, 2, (self.pe_dim,), device=pe.device) * 2 - 1).to(pe.dtype)
            h = h + self.lin_pe(pe)
        return h

    def decode(self, h: Tensor) -> Tensor:
        return self.lin_out(h)


@register_model("universal_transformer", aliases=("universal_graph_transformer",))
class UniversalTransformer(GraphTransformer):
    r"""Universal graph transformer (report §3.3): one transformer layer, weights shared, applied
    ``num_layers`` times; its parameters are those of a one-layer :class:`GraphTransformer`.
    Options as :class:`GraphTransformer`.

    .. math::
        X^{k+1} = T_\theta(X^k),\qquad k = 0, \dots, L - 1

    with ``T_theta`` one :class:`TransformerBlock` (Dehghani et al. 2018).
    """

    family = "transformer"
    shared_block = True
