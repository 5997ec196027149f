"""``DeepGNN``: the depth machinery every model family shares.

A family subclasses :class:`DeepGNN` and implements only :meth:`DeepGNN.make_layer`
(PyG ``BasicGNN`` style).  The base class owns depth, heads, residual connections,
normalisation plugins, activation, dropout and the self-loop policy, so a 64-layer GATv2
and a 64-layer GCN differ only in the layer they stack.

Layer contract (what ``make_layer`` must return) — see :class:`LayerProtocol`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol, Set, Tuple, Union, runtime_checkable

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from zoo.graph import Graph, GraphLike, _read_edges, as_graph, read_edge_features, self_loop_policy
from zoo.nn.degree_features import degree_block
from zoo.nn.encoders import align_edge_features, make_encoder
from zoo.nn.heads import make_classifier
from zoo.nn.model import GraphModel, LayerOptions
from zoo.nn.replay import replayable
from zoo.nn.validation import (check_activated_classifier_input, check_edge_inputs, check_encoder_options, check_node_features, positive_int,
                               probability, resolve_activation, resolve_classifier, resolve_hidden_heads,
                               resolve_residual, resolve_score_norm, resolve_choice, resolve_classifier_input,
                               DROPOUT_POSITIONS)
from zoo.norms import FeatureNorm, ScoreNorm, resolve_norm
from zoo.ops._custom import under_vmap
from zoo.ops.dropout import dropout, to_linear_only


@runtime_checkable
class LayerProtocol(Protocol):
    """What a message-passing layer gives the base class.

    ``forward(graph, x)`` returns ``(out, alpha)``: ``out`` is ``(N, heads * channels)`` when
    ``concat`` else ``(N, channels)``; ``alpha`` is ``(E, heads)``, the attention (or
    propagation) coefficient of every edge of ``graph.edge_index``.

    The three ``*_params`` methods describe the layer's rescaling symmetry, used by the
    balanced initialisations and conservation diagnostics (balance paper, Thm. 2.2/6.3/6.4):
    scaling output neuron ``i``'s *incoming* parameters by ``lambda`` and its *attention*
    parameters by ``1/lambda`` scales that neuron's output by ``lambda``.

    A layer with attention scores talks to a score norm only through the record of its family's
    ``score_kind`` (:mod:`zoo.norms.scores`): ``score_norm.normalize(AdditiveScores(...))`` etc.
    """

    in_dim: int
    channels: int
    heads: int
    concat: bool

    def forward(self, graph: Graph, x: Tensor) -> Tuple[Tensor, Tensor]: ...

    def incoming_params(self) -> List[Tensor]:
        """Parameters whose dim 0 indexes the ``heads * channels`` output neurons."""

    def attention_params(self) -> List[Tensor]:
        """Parameters whose flattened index is the output neuron (e.g. ``a`` of shape (heads, channels))."""

    def outgoing_params(self) -> List[Tensor]:
        """Parameters whose dim 1 indexes this layer's ``in_dim`` input neurons."""

    # Optional (absent: none), read by the inits through zoo.symmetry:
    #   bias_params() -> List[Tensor]: every additive bias (output, attention and score biases, e.g.
    #       GATDB's xi): an init that starts the attention at zero starts them at zero too;
    #   target_params() -> List[Tensor]: the feature matrices that read only the target node
    #       (unshared W_t), which the balanced inits may set to zero (unshared="zero_target").


#: the methods of :class:`LayerProtocol` that describe a layer's rescaling symmetry
SYMMETRY_METHODS = ("incoming_params", "attention_params", "outgoing_params")


@dataclass
class AttentionRecord:
    """Coefficients of one layer: ``alpha[e, h]`` belongs to edge ``edge_index[:, e]``, head ``h``."""

    edge_index: Tensor
    alpha: Tensor


class DeepGNN(GraphModel):
    """A stack of ``num_layers`` message-passing layers (hidden heads concatenated or averaged, output heads averaged).

    Args:
        in_dim: input feature size ``n_0``.
        out_dim: output size ``n_L`` (classes).
        hidden_dim: width of every hidden representation (all heads together with concatenated
            heads, so divisible by ``heads``; each head's width with averaged ones).
        num_layers: number of message-passing layers ``L`` (the first maps ``in_dim`` to
            ``hidden_dim``, the last ``hidden_dim`` to ``out_dim``; no extra linear layers unless
            ``input_encoder`` / ``classifier`` add them, which ``L`` does not count).
        heads: attention heads of the hidden layers.
        hidden_heads: how a hidden layer combines its heads: ``concat`` (default; ``heads`` heads of
            ``hidden_dim / heads`` channels, Veličković et al.'s hidden layers) or ``mean`` (``heads`` heads
            of ``hidden_dim`` channels, averaged: the other aggregator of LipschitzNorm §10.3's grid).
        out_heads: heads of the output layer (outputs averaged); default ``heads``.
        activation: ``relu`` (default), ``leaky_relu``, ``elu``, ``gelu``, ``tanh``, ``identity``.
        dropout: dropout rate on the features (where: ``dropout_position``).
        dropout_position: ``input`` (default: every layer's input, the raw features included, as
            Veličković et al.) or ``output`` (after every hidden layer's activation, so the raw
            features are not dropped and a separate classifier reads dropped features: Luo et
            al.'s tuned GNNs, ``LUOyk1999/tunedGNN`` ``medium_graph/model.py``).
        bias: add a bias to every layer's output (default ``False``, as in the balance paper).
        residual: ``none``; ``identity`` (``x + layer(x)`` where the widths match);
            ``linear`` (a learnable skip ``R x`` on every layer, initialised to zero);
            ``affine`` (a learnable ``R x + b`` on every layer with PyTorch's default ``nn.Linear``
            init: Luo et al.'s ``lins``; the init plugins leave it as built, as ``classifier``).
        norm: a normalisation plugin (name or object; see :mod:`zoo.norms`).
        norm_kwargs: options of the named norm plugin.
        self_loops: ``add`` (remove existing self-loops, add one per node; GAT's default),
            ``keep`` or ``remove``.
        input_encoder: a node-feature encoder plugin applied before layer 1 (``"atom"``: OGB's
            ``AtomEncoder``; ``"linear"``; see :mod:`zoo.nn.encoders`).  It maps the ``in_dim``
            raw columns to ``hidden_dim`` (or ``input_encoder_dim``), which layer 1 then reads.
        input_encoder_dim: width of the input encoder's output (default ``hidden_dim``).
        classifier: an output head (:mod:`zoo.nn.heads`): ``"none"`` (default: the last layer is
            the classifier, as in the balance paper) or a registered head, after which all
            ``num_layers`` layers are hidden layers.  Paper-specific encoders and heads (the LN
            authors' ``"affine"`` / ``"linear"``) are registered by :mod:`zoo.papers`.
        classifier_input: what a separate classifier reads: ``raw`` (default: the last layer's
            output as it is) or ``activated`` (the last layer gets the norm, the activation and,
            with ``dropout_position="output"``, the dropout of a hidden layer first: Luo et al.'s
            MPNN).  Needs a ``classifier``.
        edge_encoder: an edge-feature encoder plugin (``"bond"``: OGB's ``BondEncoder``;
            ``"linear"``) whose ``hidden_dim``-wide output every layer adds to its attention
            score; only for families whose layer has an edge term (``supports_edge_features``:
            GATv2, GATDB, GATNB).  ``forward`` then needs ``edge_attr``.
        edge_dim: raw edge-feature columns the edge encoder reads (``bond``: OGB's 3 by default).
        layer_degree_onehot: the largest node degree ``D``: every layer reads a one-hot degree block
            (``D + 1`` columns, self-loops not counted) beside its input, appended after the layer's
            dropout so it is never dropped (the Oxford report's code for its Table 4 variant (d),
            :mod:`zoo.nn.degree_features`); ``None`` (default): no block.
        recompute: recompute each layer in the backward pass instead of keeping its
            activations (``torch.utils.checkpoint``, non-reentrant): memory ~ one layer's
            intermediates instead of ``num_layers``, at about one extra forward of compute.
            The numbers do not change (dropout masks are replayed).  Not applied under
            ``torch.func.vmap`` (the benchmark's stacked replicas): train such models with
            ``--sequential`` or ``--max-replicas 1`` to get the memory saving.
        options: the family's layer options (its ``options_class``, e.g. ``negative_slope`` and
            ``attn_dropout`` of the GAT-style families), stored as ``model.options`` and handed to
            :meth:`make_layer`.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        hidden_dim: int = 64,
        num_layers: int = 2,
        *,
        heads: int = 1,
        hidden_heads: str = "concat",
        out_heads: Optional[int] = None,
        activation: Union[str, nn.Module] = "relu",
        dropout: float = 0.0,
        dropout_position: str = "input",
        bias: bool = False,
        residual: str = "none",
        norm: Any = None,
        norm_kwargs: Optional[Dict[str, Any]] = None,
        self_loops: Optional[str] = None,
        input_encoder: Any = None,
        input_encoder_dim: Optional[int] = None,
        classifier: Optional[str] = None,
        classifier_input: str = "raw",
        edge_encoder: Any = None,
        edge_dim: Optional[int] = None,
        recompute: bool = False,
        layer_degree_onehot: Optional[int] = None,
        **options: Any,
    ) -> None:
        super().__init__()
        owner = self.family or type(self).__name__
        for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("hidden_dim", hidden_dim),
                            ("num_layers", num_layers), ("heads", heads)):
            positive_int(name, value)
        positive_int("out_heads", out_heads, allow_none=True)
        positive_int("input_encoder_dim", input_encoder_dim, allow_none=True)
        positive_int("layer_degree_onehot", layer_degree_onehot, allow_none=True)
        self.layer_degree_onehot = layer_degree_onehot
        self.classifier_kind = resolve_classifier(classifier, out_heads)
        self.dropout_position = resolve_choice("dropout_position", dropout_position, DROPOUT_POSITIONS)
        self.classifier_input = resolve_classifier_input(owner, classifier_input, self.classifier_kind)
        check_encoder_options(owner, input_encoder, input_encoder_dim, edge_encoder, self.supports_edge_features,
                              edge_dim)
        self.hidden_heads = resolve_hidden_heads(owner, hidden_heads, heads, out_heads, hidden_dim, self.supports_heads)
        self.residual = resolve_residual(residual)
        self.dropout = probability("dropout", dropout)
        self._init_model(num_layers, options)
        self.in_dim, self.out_dim, self.hidden_dim = in_dim, out_dim, hidden_dim
        self.heads, self.bias, self.recompute = heads, bias, bool(recompute)
        # a separate classifier makes every attention layer a hidden one (heads concatenated)
        self.out_heads = heads if out_heads is None or self.classifier_kind != "none" else out_heads
        self.self_loops = self.default_self_loops if self_loops is None else self_loop_policy(self_loops)
        self.act, self.positively_homogeneous = resolve_activation(activation)
        self.activation = activation if isinstance(activation, str) else type(activation).__name__
        self.norm_plugin = resolve_norm(norm, **(norm_kwargs or {}))
        score_norm = resolve_score_norm(self.norm_plugin, owner, self.score_kind)
        #: where the feature norm runs (``pre``, ``post``, ``post_activation``); ``None``: no feature norm
        self.norm_placement = self.norm_plugin.placement if isinstance(self.norm_plugin, FeatureNorm) else None
        #: the feature norm's modules are called as ``norm(x, graph)`` (GraphNormv2), not ``norm(x)``
        self.norm_reads_graph = self.norm_placement is not None and bool(getattr(self.norm_plugin, "reads_graph", False))
        check_activated_classifier_input(owner, self.classifier_input, self.act, self.norm_placement,
                                         self.dropout if self.dropout_position == "output" else 0.0)
        encoder_dim = hidden_dim if input_encoder_dim is None else input_encoder_dim
        self.input_encoder = make_encoder("input", input_encoder, in_dim, encoder_dim)
        self.edge_encoder = make_encoder("edge", edge_encoder, edge_dim, hidden_dim)
        #: width of the encoded edge features each layer reads (``None``: no edge term).
        self.edge_dim = hidden_dim if self.edge_encoder is not None else None
        self._build_layers(in_dim if self.input_encoder is None else encoder_dim, score_norm)
        self.last_graph: Optional[Graph] = None

    def _build_layers(self, first_dim: int, score_norm: Optional[ScoreNorm]) -> None:
        """The ``num_layers`` layers (``make_layer``), the classifier, the linear skips and the feature norms."""
        num_layers, hidden_dim, heads = self.num_layers, self.hidden_dim, self.heads
        classifier = self.classifier_kind
        stack_out = self.out_dim if classifier == "none" else hidden_dim
        dims = [first_dim] + [hidden_dim] * (num_layers - 1) + [stack_out]
        extra = 0 if self.layer_degree_onehot is None else self.layer_degree_onehot + 1
        self.layers = nn.ModuleList()
        for index in range(num_layers):
            output_layer = index == num_layers - 1 and classifier == "none"
            layer_heads = self.out_heads if output_layer else heads
            concat = not output_layer and self.hidden_heads == "concat"
            channels = dims[index + 1] if output_layer else hidden_dim // heads if concat else hidden_dim
            self.layers.append(self.make_layer(index, dims[index] + extra, channels, layer_heads, concat,
                                               score_norm=score_norm, options=self.options))
        # PyTorch's default Linear init, as the authors' fc1 (init plugins reset only the layers).
        self.classifier = make_classifier(classifier, hidden_dim, self.out_dim)
        self.skips = nn.ModuleList()
        if self.residual in ("linear", "affine"):
            for index in range(num_layers):
                skip = nn.Linear(dims[index], dims[index + 1], bias=self.residual == "affine")
                if self.residual == "linear":
                    nn.init.zeros_(skip.weight)  # a zero skip keeps the network balanced at init
                self.skips.append(skip)
        self.norms = nn.ModuleList()
        if self.norm_placement is not None:
            normed = num_layers if self.classifier_input == "activated" else num_layers - 1
            self.norms.extend(self.norm_plugin.make(hidden_dim) for _ in range(normed))

    # ------------------------------------------------------------------ family hook
    def make_layer(
        self, index: int, in_dim: int, channels: int, heads: int, concat: bool, *,
        score_norm: Optional[ScoreNorm] = None, options: LayerOptions
    ) -> nn.Module:
        """Return layer ``index`` mapping ``in_dim`` to ``heads x channels`` (concatenated or averaged).

        ``score_norm`` (only for a family with a ``score_kind``; already checked to have a rule for
        that kind) is handed to the layer, which calls ``score_norm.normalize(record)`` with a
        record of its kind (:mod:`zoo.norms.scores`).  ``options``: the family's layer options
        (an instance of its ``options_class``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ forward
    def forward(
        self, graph: GraphLike, x: Tensor, return_attention: bool = False, edge_attr: Optional[Tensor] = None
    ) -> Union[Tensor, Tuple[Tensor, List[AttentionRecord]]]:
        """Shapes: ``x`` ``(N, in_dim)`` -> ``(N, out_dim)``; with ``return_attention`` also one
        :class:`AttentionRecord` per layer (coefficients aligned with the edges used).
        ``edge_attr`` ``(E0, edge_dim)``: raw features of the columns of ``graph``'s edge index
        (models with an ``edge_encoder``; read from ``graph.edge_attr`` when ``graph`` is a PyG ``Data``)."""
        check_node_features(self, x, self.in_dim)
        g = as_graph(graph, x, self.self_loops)
        self.last_graph = g
        edges = self._encode_edges(graph, g, x, edge_attr)
        if self.input_encoder is not None:
            x = self.input_encoder(x)
        records: List[AttentionRecord] = []
        if g.num_nodes == 0:  # an empty graph has an empty output (the layers' reshapes need N > 0)
            out = x.new_zeros(0, self.out_dim)
            empty = [AttentionRecord(g.edge_index, x.new_zeros(0, layer.heads)) for layer in self.layers]
            return (out, empty) if return_attention else out
        # Under torch.func.vmap (stacked replicas) the recomputation would run outside the vmap
        # and fail, so layers are not recomputed there (same numbers, more memory).
        in_vmap = self.recompute and under_vmap(next(self.parameters()))
        for index, layer in enumerate(self.layers):
            if index in self.skipped_layers:
                if layer.in_dim != (layer.channels * layer.heads if layer.concat else layer.channels):
                    raise ValueError(f"layer {index} changes the width and cannot be skipped")
                x = self.taps[index](x)
                continue
            if self.recompute and torch.is_grad_enabled() and not in_vmap:
                # Keep only this layer's input; recompute its intermediates in the backward pass.
                out, alpha = checkpoint(self._recomputable_block(index), g, x, edges, use_reentrant=False)
            else:
                out, alpha = self._layer_block(index, g, x, edges)
            x = self.taps[index](out)
            if return_attention:
                records.append(AttentionRecord(g.edge_index, alpha))
        if self.classifier is not None:  # the last layer's output, activated only with classifier_input="activated"
            x = self.classifier(x)
        return (x, records) if return_attention else x

    def _layer_block(self, index: int, g: Graph, x: Tensor, edges: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """Layer ``index`` with its dropout, residual, norm and activation: ``x`` -> (output, alpha)."""
        layer = self.layers[index]
        pre_norm, post_act_norm = self.norm_placement == "pre", self.norm_placement == "post_activation"
        h = self._norm(index - 1, x, g) if pre_norm and index > 0 else x
        if self.dropout_position == "input":
            with to_linear_only(self._input_to_linear_only(layer)):
                h = dropout(h, self.dropout, self.training)
        # the degree block joins after the dropout (never dropped); residuals still read ``h``
        inp = h if self.layer_degree_onehot is None else torch.cat(
            [h, degree_block(g, self.layer_degree_onehot, h.dtype)], dim=-1)
        fused = self._layer_applies_relu(index, layer)
        args = (g, inp) if edges is None else (g, inp, edges)
        result = layer(*args, relu=True) if fused else layer(*args)
        if not (isinstance(result, tuple) and len(result) == 2):  # a custom layer's forward: say which contract
            raise TypeError(f"{type(layer).__name__}.forward must return (out, alpha) — the output features and "
                            f"the (E, heads) edge coefficients, see zoo.nn.base.LayerProtocol — got "
                            f"{type(result).__name__}")
        out, alpha = result
        if self.residual in ("linear", "affine"):
            out = out + self.skips[index](h)
        elif self.residual == "identity" and out.shape == h.shape:
            out = out + h
        if index != self.num_layers - 1 or self.classifier_input == "activated":
            if self.norms and not pre_norm and not post_act_norm:
                out = self._norm(index, out, g)
            out = out if fused else self.act(out)
            if post_act_norm:  # placement "post_activation": norm after the nonlinearity
                out = self._norm(index, out, g)
            if self.dropout_position == "output":
                out = dropout(out, self.dropout, self.training)
        return out, alpha

    def _input_to_linear_only(self, layer: nn.Module) -> bool:
        """Whether the layer's dropped input is read by ``zoo.ops.sparse_linear.linear`` alone: no residual
        or degree block reads it, no hook sees the layer's inputs, and the layer's class vouches for its
        own ``forward`` (``input_to_linear_only`` is that function: a subclass with another forward does not)."""
        return (self.residual == "none" and self.layer_degree_onehot is None
                and not (layer._forward_pre_hooks or layer._forward_hooks)
                and getattr(type(layer), "input_to_linear_only", None) is type(layer).forward)

    def _layer_applies_relu(self, index: int, layer: nn.Module) -> bool:
        """Whether layer ``index`` is asked for its output's ReLU (a layer with ``fuses_relu``, e.g. GCN's,
        computes it in its last product: one pass over the output fewer, forward and backward): only where
        the model's activation is a plain ReLU that follows the layer's output directly (no residual, no
        norm between them).  The numbers are those of ``self.act`` after the layer."""
        if not getattr(layer, "fuses_relu", False) or type(self.act) is not nn.ReLU or self.residual != "none":
            return False
        if self.act._forward_hooks or self.act._forward_pre_hooks:  # a hook on the activation sees it run
            return False
        if self.norms and self.norm_placement not in ("pre", "post_activation"):
            return False
        return index != self.num_layers - 1 or self.classifier_input == "activated"

    def _norm(self, index: int, x: Tensor, g: Graph) -> Tensor:
        """Feature norm ``index``; a plugin that declares ``reads_graph`` (GraphNormv2) also gets the graph."""
        return self.norms[index](x, g) if self.norm_reads_graph else self.norms[index](x)

    def _recomputable_block(self, index: int) -> Any:
        """``_layer_block(index, ...)`` for activation checkpointing: bound to the parameter tensors in
        use *now*, replaying the per-replica dropout streams on recomputation (:mod:`zoo.nn.replay`)."""
        return replayable(self, lambda g, x, edges: self._layer_block(index, g, x, edges))

    def _encode_edges(self, graph: GraphLike, g: Graph, x: Tensor, edge_attr: Optional[Tensor]) -> Optional[Tensor]:
        """Encoded edge features aligned with ``g.edge_index`` (``None`` without an edge encoder)."""
        if self.edge_encoder is not None and (edge_attr is None or isinstance(edge_attr, str)):
            edge_attr = read_edge_features(graph, edge_attr)  # Data.edge_attr, g.edata (single or named)
        if self.edge_encoder is None:
            if edge_attr is not None:
                raise ValueError(
                    f"edge_attr was passed but this {self.family or type(self).__name__} has no edge_encoder; "
                    "build it with edge_encoder='bond' (OGB molecules) or 'linear' (gatv2/gatdb), or drop edge_attr"
                )
            return None
        if edge_attr is None:
            raise ValueError("this model was built with an edge_encoder and needs edge features: pass "
                             "edge_attr=(E, edge_dim) or a PyG Data with edge_attr")
        num_raw_edges = g.num_edges if graph is g else _read_edges(graph, x)[0].size(1)
        check_edge_inputs(self, edge_attr, self.edge_encoder, num_raw_edges)
        encoded = self.edge_encoder(edge_attr if not edge_attr.is_floating_point() else edge_attr.to(x.dtype))
        if graph is g:  # already normalised: edge_attr is aligned with its edges
            aligned = encoded
        else:
            raw_index, _ = _read_edges(graph, x)
            aligned = align_edge_features(raw_index.to(encoded.device), g.num_nodes, g.self_loops, encoded)
        if aligned.size(0) != g.num_edges:  # pragma: no cover - both follow zoo.graph._apply_policy
            raise RuntimeError("edge features and edges disagree after the self-loop policy")
        return aligned

    # ------------------------------------------------------------------ conservation-law support
    def rescale_groups(self) -> List[Dict[str, List[Tensor]]]:
        """Per layer, the parameters of the rescaling symmetry (see :class:`LayerProtocol`),
        with the linear skip weights added to the incoming and outgoing sides."""
        groups = []
        for index, layer in enumerate(self.layers):
            missing = [m for m in SYMMETRY_METHODS if not callable(getattr(layer, m, None))]
            if missing:
                raise TypeError(f"layer {index} ({type(layer).__name__}) does not implement LayerProtocol's "
                                f"{', '.join(missing)}, which balanced inits and conservation diagnostics need "
                                "(docs/usage.md, 'A model family of your own')")
            g = {
                "incoming": list(layer.incoming_params()),
                "attention": list(layer.attention_params()),
                "outgoing": list(layer.outgoing_params()),
            }
            if self.residual in ("linear", "affine"):
                g["incoming"].append(self.skips[index].weight)
                g["outgoing"].append(self.skips[index].weight)
                if self.skips[index].bias is not None:  # R x + b: b scales with its neuron
                    g["incoming"].append(self.skips[index].bias)
            groups.append(g)
        return groups

    def conservation_law_violations(self) -> List[str]:
        """Why the balance paper's conservation law does not hold for this model (empty if it does)."""
        reasons = super().conservation_law_violations()
        if not self.positively_homogeneous:
            reasons.append(
                f"activation {self.activation!r} is not positively homogeneous (the law needs phi(ax) = a phi(x), "
                "e.g. relu or leaky_relu)"
            )
        if self.hidden_heads == "mean" and self.heads > 1:
            reasons.append("averaged hidden heads: each hidden neuron is a mean over the heads' rows, so one "
                           "neuron has several incoming rows (use hidden_heads='concat')")
        if self.residual == "identity":
            reasons.append("identity skips have no parameter to absorb the rescaling (use residual='linear')")
        if self.norm_plugin.name != "none":
            reasons.append(f"norm {self.norm_plugin.name!r} between/inside layers breaks the rescaling symmetry")
        for index, layer in enumerate(self.layers):
            missing = [m for m in SYMMETRY_METHODS if not callable(getattr(layer, m, None))]
            if missing:
                reasons.append(f"layer {index} ({type(layer).__name__}) does not implement LayerProtocol's "
                               f"{', '.join(missing)}")
                break
        if self.classifier is not None:
            reasons.append(f"the separate classifier (classifier={self.classifier_kind!r}) and its parameters are "
                           "outside the layers' rescaling groups (use classifier='none')")
        return reasons

    def extra_repr(self) -> str:
        return (
            f"in_dim={self.in_dim}, hidden_dim={self.hidden_dim}, out_dim={self.out_dim}, "
            f"num_layers={self.num_layers}, heads={self.heads}, "
            + (f"hidden_heads={self.hidden_heads!r}, " if self.hidden_heads != "concat" else "")
            + f"residual={self.residual!r}, norm={self.norm_plugin.name!r}, activation={self.activation!r}"
            + (f", classifier={self.classifier_kind!r}" if self.classifier is not None else "")
        )
