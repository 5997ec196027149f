"""Self-attention networks (SAN) with Post-LN, Pre-LN and nonlocal message passing, exactly as
Guan & He, "Solving Oversmoothing in GNNs via Nonlocal Message Passing" (§3.1, §4.1) write them.

Each equation is stated once: the encoder and decoder in :class:`SAN`, the message passing ``MP``
in :class:`zoo.models.transformer.GraphSelfAttention`, the Post-LN / Pre-LN layer in
:class:`zoo.models.transformer.TransformerBlock` (``san_post_ln``, ``san_pre_ln``), the nonlocal
message passing in :class:`SANNonlocal`.

Initialisation (the paper states none): the ``init`` plugin (default ``xavier``) re-initialises
the hidden ``layers`` only; the encoder and decoder keep PyTorch's ``nn.Linear`` default
(uniform, bound ``1/sqrt(fan_in)``, biases included).  The energies at initialisation (Tables
2/4/6) depend on both.  On raw bag-of-words features the encoder's bias dominates its output,
so the representations start nearly constant across nodes (zero encoder biases: Cora, L = 2,
1.4-1.5 decades higher); the layers' weight scale sets how strongly each layer smooths
(Xavier gain 1.3 instead of 1: Pre-LN 0.35-0.5 decades higher, Post-LN at L = 2 0.4 lower).
``tests/papers/test_san_energy_init.py`` pins this split.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from torch import Tensor, nn

from zoo.graph import Graph
from zoo.models.transformer import TransformerBlock, check_nonlocal_norm
from zoo.nn.attention_stack import AttentionStack
from zoo.nn.validation import check_stack_options, probability, resolve_block_norms
from zoo.norms.scores import DOT_PRODUCT
from zoo.ops.dropout import dropout, to_linear_only
from zoo.ops.sparse_linear import linear
from zoo.registry import register_model


class SAN(AttentionStack):
    r"""Common SAN body; the registered subclasses fix ``placement`` and ``nonlocal_energy``.

    .. math::
        X^0 = \mathrm{MLP}(\mathrm{dropout}(x)),\qquad \mathrm{out} = X^L W_{\mathrm{dec}}

    with the encoder ``MLP = Linear -> ReLU -> Linear`` to ``hidden_dim`` and ``L`` hidden layers
    (:class:`~zoo.models.transformer.TransformerBlock`) in between; the paper's decoder, an MLP
    without activation, is one linear map (two stacked linear maps without an activation are one
    linear map with a rank constraint).

    Shapes:
        x: ``(N, in_dim)`` -> out: ``(N, out_dim)``; hidden representations ``(N, hidden_dim)``.

    Args:
        in_dim, out_dim: input features and outputs.
        hidden_dim: width of every hidden representation (the paper uses 32).
        num_layers: hidden (attention + FFN) layers.
        heads: attention heads (splitting ``hidden_dim``).
        dropout: on the input features (encoder) and on every sublayer output.
        input_dropout: the encoder's dropout on the input features alone (§3.1: "the encoder
            is composed of a dropout, and a MLP"); default: ``dropout``.
        attn_dropout: on attention coefficients.
        ffn_dim: FFN hidden width (default ``2 * hidden_dim``).
        norm, norm_kwargs: ``lipschitz`` normalises the scores (Eq. 19 of the LipschitzNorm
            paper); a feature norm (``pairnorm``, ``layernorm``) takes the place of ``LN``.
        nonlocal_norm: ``san_nonlocal`` only: the reading of the energy in front of each head:
            ``"n"`` (``(1/n) ||P_i X - X||^2``, §4.1, default), ``"nd"`` (``1/(n d)``), ``"none"``,
            or ``"mu"`` (§2's Laplacian energy of head ``i``'s weighted graph: each node's
            ``|P_i X - X|^2`` weighted by its softmax denominator ``mu_i``).
    """

    family = "san"
    placement = "post"
    nonlocal_energy = False
    score_kind = DOT_PRODUCT

    def __init__(self, in_dim: int, out_dim: int, hidden_dim: int = 32, num_layers: int = 2, *,
                 heads: int = 1, dropout: float = 0.0, attn_dropout: float = 0.0, ffn_dim: Optional[int] = None,
                 input_dropout: Optional[float] = None,
                 norm: Any = None, norm_kwargs: Optional[Dict[str, Any]] = None, nonlocal_norm: str = "n") -> None:
        super().__init__()
        check_stack_options(hidden_dim, heads, dropout, attn_dropout)
        nonlocal_norm = check_nonlocal_norm(nonlocal_norm)
        self.input_dropout = dropout if input_dropout is None else float(probability("input_dropout", input_dropout))
        if nonlocal_norm != "n" and not self.nonlocal_energy:
            raise ValueError(f"nonlocal_norm={nonlocal_norm!r} only applies to san_nonlocal (the nonlocal energy factor)")
        self.in_dim, self.out_dim, self.hidden_dim, self.heads, self.dropout = in_dim, out_dim, hidden_dim, heads, dropout
        score_norm, feature_norm = resolve_block_norms(norm, norm_kwargs, self.family, self.score_kind)
        self.norm_plugin = score_norm or feature_norm
        self._init_stack(num_layers)
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim))
        self.layers = nn.ModuleList(
            TransformerBlock(hidden_dim, heads, ffn_dim or 2 * hidden_dim, placement=self.placement,
                             dropout=dropout, attn_dropout=attn_dropout, scaled=True, score_norm=score_norm,
                             feature_norm=feature_norm, nonlocal_energy=self.nonlocal_energy,
                             nonlocal_norm=nonlocal_norm)
            for _ in range(num_layers)
        )
        self.decoder = nn.Linear(hidden_dim, out_dim)

    def encode(self, graph: Graph, x: Tensor) -> Tensor:
        first, rest = self.encoder[0], self.encoder[1:]
        # the first Linear as zoo's `linear`: a CSR product on bag-of-words input (also after dropout),
        # which alone reads the dropped input (so that input is written densely only where linear needs it)
        with to_linear_only():
            dropped = dropout(x, self.input_dropout, self.training)
        return rest(linear(dropped, first.weight) + first.bias)

    def decode(self, h: Tensor) -> Tensor:
        return self.decoder(h)


@register_model("san_post_ln")
class SANPostLN(SAN):
    """Post-LN SAN: ``Y = LN(X + MP(X))``, ``X' = LN(Y + FFN(Y))`` (nonlocal-MP paper §3.1)."""

    placement = "post"


@register_model("san_pre_ln")
class SANPreLN(SAN):
    """Pre-LN SAN: ``Y = X + MP(LN(X))``, ``X' = Y + FFN(LN(Y))`` (nonlocal-MP paper §3.1)."""

    placement = "pre"


@register_model("san_nonlocal", aliases=("nonlocal_san",))
class SANNonlocal(SAN):
    r"""Nonlocal SAN with Post-LN: head ``i``'s aggregation ``P_i X V_i`` is multiplied by the
    Laplacian energy ``(1/n) ||P_i X - X||^2`` (nonlocal-MP paper §4.1); no extra parameters.

    .. math::
        \mathrm{NonlocalMP}(X) = \Big(\tfrac1n \|P_1 X - X\|^2\, P_1 X V_1 \,\|\, \dots \,\|\,
            \tfrac1n \|P_h X - X\|^2\, P_h X V_h\Big)\, W

    in place of ``MP`` in the Post-LN layer; ``nonlocal_norm`` picks the reading of the factor.
    """

    placement = "post"
    nonlocal_energy = True
