r"""SPoGInit: "Exploring and Improving Initialization for Deep Graph Neural Networks: A Signal
Propagation Perspective" (Wang, Chen, Zhang, Sun, Ding; TMLR 2025, arXiv:2506.16790).

The abstract names three signal-propagation metrics — forward propagation (FSP), backward
propagation (BSP) and graph embedding variation (GEV) — and "searching for weight initialization
variances that optimize the three metrics".  The paper's method section could not be read here, so
the zoo follows the authors' code (``YChen-zzz/Code-for-SPoGInit``, ``spoginit.py``:
``SpogInit.zeroincrease_initialization`` with ``metric_way="divide_old"``, the setting
``Arxiv_run.py`` uses for plain GCNs, on ``models/model.py``'s ``MyGCN``).  One scale ``s_l`` per
layer multiplies that layer's feature matrices (``LayerProtocol.outgoing_params()``), starting from
the Xavier draw (``s_l = 1``), and a zero-order search minimises

.. math:: M(s) = w_1 \Big(\frac{\|H^{1}\|_F}{\|H^{L-1}\|_F} - 1\Big)^2
               + w_2 \Big(\frac{\|\nabla W^{2}\|_F}{\|\nabla W^{L-1}\|_F} - 1\Big)^2
               + w_3 \big(\mathrm{GEV}(X^{0}) - \mathrm{GEV}(H^{L-1})\big)^2,\qquad
          \mathrm{GEV}(X) = \frac{1}{2d} \sum_{k=1}^{d} \frac{x_k^\top (x_k - P x_k)}{x_k^\top x_k}

with ``H^l`` hidden layer ``l``'s (activated) output — ``MyGCN.print_all_x`` returns the ``L - 1``
hidden outputs, not the logits (a model with a classifier head has ``L`` hidden outputs; option
``output_layer=True`` appends the output layer's logits, as the ``MyGCN`` of the authors' Cora
notebook ``SP_GCN_github.ipynb`` does) — ``\nabla W^l`` the gradient of a cross-entropy loss against
random labels, ``x_k`` the columns of ``X`` and ``P = D^{-1/2}(A + I)D^{-1/2}`` (GCN's operator).
Each step draws ``probes`` random directions ``z`` and estimates ``\partial M / \partial s`` as
``sum_z (M(s + delta z) - M(s)) / (delta z probes)``, moves every ``s_l`` by ``-lr sign(.)``,
multiplies ``lr`` by 0.7 every 20 steps, stops after ``patience`` steps without a new best, and
keeps the best ``s``.  ``probes`` is 1: the code evaluates three directions but resets its
estimate inside that loop, so only the last one steers each step (``probes=3`` gives the mean its
division by 3 intends).  As the code's default (``generate_data=True``) the metrics are measured
on Gaussian features and random labels on the real graph, re-drawn each step.

Differences from the code (``docs/inits.md``): the loss reads every node (the code: the training
mask, which an init does not see); the graph is the task's graph as the model normalises it; the
first step always counts as a new best (the code's best starts at 1000, so a metric above 1000
spends patience).

Why it cannot help a ReLU GCN without biases: ReLU is positively homogeneous, so multiplying layer
``l``'s weights by ``s_l > 0`` multiplies every later output by ``prod s_l`` and changes nothing
else — GEV, the rank and the direction of every ``H^l`` are invariant, only magnitudes move (and
each ``s_l`` moves at most about 1.2 in 40 steps).  The authors' GCNs use tanh.

Options: ``steps`` 40, ``lr`` 0.05, ``patience`` 20, ``w1`` 1, ``w2`` 10, ``w3`` 1, ``probes`` 1,
``delta`` 1e-5, ``random_data`` True (``False``: the task's features, fixed labels drawn once),
``output_layer`` False.  It needs the graph: it runs at the model's first forward
(:mod:`zoo.inits.deferred`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parameter import UninitializedParameter

from zoo.inits._registry import register_init
from zoo.inits.xavier import xavier
from zoo.inits.deferred import at_first_forward
from zoo.symmetry import feature_matrices
from zoo.inits.variance import layer_protocol_reasons, scatter_sum


@dataclass
class SearchOptions:
    steps: int = 40
    lr: float = 0.05
    patience: int = 20
    w1: float = 1.0
    w2: float = 10.0
    w3: float = 1.0
    probes: int = 1
    delta: float = 1e-5
    random_data: bool = True
    output_layer: bool = False


def sym_propagate(edge_index: Tensor, num_nodes: int, x: Tensor) -> Tensor:
    """``P x`` with ``P = D^{-1/2}(A + I)D^{-1/2}`` (existing self-loops replaced by one per node)."""
    src, dst = edge_index
    keep = src != dst
    loops = torch.arange(num_nodes, device=x.device)
    src, dst = torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
    deg = scatter_sum(torch.ones_like(src, dtype=x.dtype), dst, num_nodes)
    coef = (deg.index_select(0, src) * deg.index_select(0, dst)).rsqrt()
    return scatter_sum(coef.unsqueeze(-1) * x.index_select(0, src), dst, num_nodes)


def graph_embedding_variation(x: Tensor, edge_index: Tensor) -> Tensor:
    """``GEV(X) = 1/(2d) sum_k x_k^T (x_k - P x_k) / x_k^T x_k`` (columns with ``x_k = 0`` count 0)."""
    num = (x * (x - sym_propagate(edge_index, x.size(0), x))).sum(0)
    den = x.pow(2).sum(0)
    ratio = torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))
    return 0.5 * ratio.sum() / x.size(1)


def _first_matrix(layer: nn.Module) -> Optional[Tensor]:
    mats = [w for w in feature_matrices(layer) if not isinstance(w, UninitializedParameter)]
    return mats[0] if mats else None


class SignalPropagation:
    """FSP, BSP and GEV of ``model`` on ``(graph, x)`` (the module docstring's ``M``)."""

    def __init__(self, model: nn.Module, graph: Any, x: Tensor, opts: SearchOptions, generator: torch.Generator):
        self.model, self.graph, self.x, self.opts, self.gen = model, graph, x, opts, generator
        self.out_dim = int(getattr(model, "out_dim", 2))
        self.fixed = None if opts.random_data else (x, self._labels())

    def _labels(self) -> Tensor:
        classes = max(self.out_dim, 2)
        return torch.randint(0, classes, (self.x.size(0),), generator=self.gen).to(self.x.device)

    def data(self) -> Tuple[Tensor, Tensor]:
        if self.fixed is not None:
            return self.fixed
        x = torch.randn(self.x.shape, generator=self.gen, dtype=self.x.dtype).to(self.x.device)
        return x, self._labels()

    def metric(self, x: Tensor, y: Tensor, gev_in: Tensor) -> float:
        """``M`` on ``(x, y)``: ``w1 FSP + w2 BSP + w3 (GEV_in - GEV_out)^2``."""
        terms = self.terms(x, y)
        o = self.opts
        return o.w1 * terms["fsp"] + o.w2 * terms["bsp"] + o.w3 * (float(gev_in) - terms["gev"]) ** 2

    def terms(self, x: Tensor, y: Tensor) -> dict:
        """The three metrics on ``(x, y)``: ``fsp``, ``bsp`` and the output's ``gev``."""
        outputs: List[Tensor] = []
        hooks = [tap.register_forward_hook(lambda m, i, o: outputs.append(o)) for tap in self.model.taps]
        try:
            out, records = self.model(self.graph, x, return_attention=True)
        finally:
            for h in hooks:
                h.remove()
        if out.size(-1) == 1:
            loss = F.binary_cross_entropy_with_logits(out[:, 0], (y % 2).to(out.dtype))
        else:
            loss = F.cross_entropy(out, y % out.size(-1))
        mats = [_first_matrix(layer) for layer in self.model.layers]
        grads = torch.autograd.grad(loss, [w for w in mats if w is not None], allow_unused=True)
        grads = [g if g is not None else torch.zeros(()) for g in grads]
        hidden = signal_outputs(self.model, outputs, self.opts.output_layer)
        first, last = hidden[0].detach(), hidden[-1].detach()
        fsp = (first.norm() / last.norm().clamp_min(1e-300) - 1) ** 2
        bsp = (grads[1].norm() / grads[-2].norm().clamp_min(1e-300) - 1) ** 2 if len(grads) >= 3 else torch.zeros(())
        gev = graph_embedding_variation(last, records[-1].edge_index)
        return {"fsp": float(fsp), "bsp": float(bsp), "gev": float(gev)}


def signal_outputs(model: nn.Module, outputs: List[Tensor], output_layer: bool = False) -> List[Tensor]:
    """The layer outputs FSP and GEV read: the hidden ones (``H^1 .. H^{L-1}`` when the last layer
    is the output layer, all ``L`` under a head that decodes them), plus the logits with ``output_layer``."""
    last_is_output = hasattr(model, "classifier") and model.classifier is None
    if output_layer or not last_is_output or len(outputs) < 2:
        return outputs
    return outputs[:-1]


def _scale_layers_(model: nn.Module, factors: Tensor) -> None:
    with torch.no_grad():
        for layer, f in zip(model.layers, factors.tolist()):
            for w in feature_matrices(layer):
                if not isinstance(w, UninitializedParameter):
                    w.mul_(f)


@dataclass
class SearchResult:
    scales: Tensor  # (L,) float64: the factors the layers' feature matrices were multiplied by
    first: float  # M at the Xavier draw (step 0)
    best: float  # M at the kept scales


def spoginit_search_(model: nn.Module, graph: Any, x: Tensor, opts: SearchOptions) -> SearchResult:
    """The zero-order search of the module docstring; sets the best scales and returns them."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 2 ** 31 - 1, ()).item()))
    sp = SignalPropagation(model, graph, x, opts, gen)
    depth = len(model.layers)
    scale = torch.ones(depth, dtype=torch.float64)
    best, best_scale, lr, stale, first = float("inf"), scale.clone(), opts.lr, 0, None
    edges = records_edges(model, graph, x)
    gev_in = graph_embedding_variation(sp.data()[0], edges)  # the input's GEV, once (as the code)
    for step in range(opts.steps):
        xs, ys = sp.data()
        current = sp.metric(xs, ys, gev_in)
        first = current if first is None else first
        if current < best:
            best, best_scale, stale = current, scale.clone(), 0
        else:
            stale += 1
            if stale >= opts.patience:
                break
        grad = torch.zeros(depth, dtype=torch.float64)
        for _ in range(opts.probes):
            z = torch.randn(depth, generator=gen, dtype=torch.float64)
            _scale_layers_(model, (scale + opts.delta * z) / scale)
            moved = sp.metric(xs, ys, gev_in)
            _scale_layers_(model, scale / (scale + opts.delta * z))
            grad += (moved - current) / (opts.delta * z * opts.probes)
        new = scale - lr * torch.sign(grad)
        _scale_layers_(model, new / scale)
        scale = new
        if step % 20 == 0:
            lr *= 0.7
    _scale_layers_(model, best_scale / scale)
    return SearchResult(best_scale, float(first), best)


def records_edges(model: nn.Module, graph: Any, x: Tensor) -> Tensor:
    """The edges the model attends over (after its self-loop policy)."""
    with torch.no_grad():
        _, records = model(graph, x, return_attention=True)
    return records[0].edge_index


@register_init("spoginit", aliases=("spog", "spog_init", "wang2025"), check=layer_protocol_reasons)
def spoginit(model: nn.Module, steps: int = 40, lr: float = 0.05, patience: int = 20, w1: float = 1.0,
             w2: float = 10.0, w3: float = 1.0, probes: int = 1, delta: float = 1e-5,
             random_data: bool = True, output_layer: bool = False) -> None:
    """SPoGInit (Wang et al., TMLR 2025; the authors' search): Xavier, then one scale per layer searched on the
    task's graph at the model's first forward (module docstring)."""
    opts = SearchOptions(int(steps), float(lr), int(patience), float(w1), float(w2), float(w3), int(probes),
                         float(delta), bool(random_data), bool(output_layer))
    if opts.steps < 1 or opts.probes < 1 or opts.patience < 1 or not opts.lr > 0 or not opts.delta > 0:
        raise ValueError("spoginit: steps, probes and patience must be >= 1, lr and delta > 0")
    if layer_protocol_reasons(model):
        raise TypeError(layer_protocol_reasons(model)[0])
    xavier(model)
    at_first_forward(model, lambda m, graph, x: spoginit_search_(m, graph, x, opts))
