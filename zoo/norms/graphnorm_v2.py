r"""GraphNormv2 (Scholkemper, Wu, Jadbabaie, Schaub, ICLR 2025, arXiv:2406.02997): a normalisation
whose *centering* is learned in the eigenbasis of the message-passing operator.

The abstract's point (c): the centering step of a normalisation layer is a projection (BatchNorm
and GraphNorm subtract each column's projection onto the constant vector ``1``), and it can
remove the part of the graph signal that carries the information; GraphNormv2 learns how much of
each direction the centering removes.  With ``P = D^{-1/2} (A + I) D^{-1/2}`` (the symmetrised
graph with self-loops: GCN's operator), ``V = [v_1 .. v_k, r]`` its ``k`` dominant eigenvectors and
``r`` the normalised part of ``1`` outside their span (``V`` has orthonormal columns):

.. math:: X_c = X - V\,\big(T \odot V^\top X\big),\qquad
          x'_{ij} = \gamma_j\,\frac{(X_c)_{ij}}{\sqrt{\tfrac1N \sum_{i'} (X_c)_{i'j}^2 + \epsilon}} + \beta_j

with learned ``T`` (``(k + 1) x dim``, initialised to 1: the full projection), ``gamma`` (1) and
``beta`` (0).  With ``k = 0`` (``V = 1 / sqrt(N)``) this is GraphNorm (Cai et al. 2021) with its
learned mean scale ``alpha = T``.

**Source.** The paper's method section could not be read here (only its abstract and OpenReview
reviews, which quote the initial-residual update ``(1 - alpha) P X W_1 + alpha X^(0) W_2``); the
form above is the zoo's reading of the abstract, checked against GraphNorm's published form, not
the authors' equation or code (``docs/norms.md``).  ``k`` is an option (default 8).

Shapes: ``(N, dim)`` and the forward's graph -> ``(N, dim)``; ``V`` is computed once per graph
(dense ``eigh`` up to 2,048 nodes, ``scipy.sparse.linalg.eigsh`` beyond) and cached on it.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from zoo.graph import Graph
from zoo.norms._registry import register_norm
from zoo.norms.features import check_placement

_DENSE_MAX_NODES = 2048


def propagation_eigenbasis(graph: Graph, k: int) -> Tensor:
    """``V`` (float64, CPU): ``k`` eigenvectors of ``D^{-1/2}(A + I)D^{-1/2}`` of largest magnitude
    (symmetrised ``A``, existing self-loops dropped) and the unit remainder of ``1`` (if non-zero)."""
    n = graph.num_nodes
    src, dst = graph.edge_index.detach().cpu().numpy()
    keep = src != dst
    import scipy.sparse as sp

    adj = sp.coo_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.float64) + sp.eye(n)
    inv_sqrt = 1.0 / np.sqrt(np.asarray(adj.sum(1)).ravel())
    op = sp.diags(inv_sqrt) @ adj @ sp.diags(inv_sqrt)
    k = min(k, n)
    if k == 0:
        basis = np.zeros((n, 0))
    elif n <= _DENSE_MAX_NODES or k >= n - 1:
        values, vectors = np.linalg.eigh(op.toarray())
        basis = vectors[:, np.argsort(-np.abs(values), kind="stable")[:k]]
    else:
        from scipy.sparse.linalg import eigsh

        values, vectors = eigsh(op, k=k, which="LM", v0=np.ones(n))
        basis = vectors[:, np.argsort(-np.abs(values), kind="stable")]
    ones = np.ones(n) / np.sqrt(max(n, 1))
    rest = ones - basis @ (basis.T @ ones)
    norm = np.linalg.norm(rest)
    if norm > 1e-8:
        basis = np.concatenate([basis, (rest / norm)[:, None]], axis=1)
    return torch.from_numpy(np.ascontiguousarray(basis))


class GraphNormV2(nn.Module):
    """The GraphNormv2 module (see the module docstring); called as ``norm(x, graph)``."""

    def __init__(self, dim: int, k: int = 8, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.k, self.eps = dim, int(k), float(eps)
        self.shift = nn.Parameter(torch.ones(self.k + 1, dim))  # T: one row per basis direction
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def basis(self, graph: Graph, dtype: torch.dtype) -> Tensor:
        key = f"graphnorm_v2_basis_{self.k}"
        return graph.cached(key, lambda: propagation_eigenbasis(graph, self.k).to(graph.device, dtype), dtype=dtype)

    def forward(self, x: Tensor, graph: Graph) -> Tensor:
        v = self.basis(graph, x.dtype)
        rows = v.size(1)  # k + 1, fewer on tiny graphs or when 1 lies in the span
        centred = x - v @ (self.shift[:rows] * (v.t() @ x))
        scale = (centred.pow(2).mean(0, keepdim=True) + self.eps).sqrt()
        return self.weight * centred / scale + self.bias

    def extra_repr(self) -> str:
        return f"dim={self.dim}, k={self.k}"


@register_norm("graphnorm_v2", aliases=("graphnormv2", "gn_v2"))
class GraphNormV2Plugin:
    """GraphNormv2 (Scholkemper et al., ICLR 2025; the zoo's reading): a learned centering in the eigenbasis of the
    propagation operator, then per-column scaling (a :class:`zoo.norms.FeatureNorm` whose modules read the
    forward's graph).

    Args:
        k: eigenvectors of the propagation operator in the learned centering (default 8).
        placement: ``post`` (after the aggregation and the residual sum, before the activation;
            default) or ``pre`` / ``post_activation``.
        eps: added to the variance.
    """

    name = "graphnorm_v2"
    reads_graph = True  # its modules are called as norm(x, graph) (FeatureNorm's optional flag)

    def __init__(self, k: int = 8, placement: str = "post", eps: float = 1e-5) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"graphnorm_v2 k must be an integer >= 0 (eigenvectors in the centering), got {k!r}")
        placement = check_placement(placement)
        self.k, self.placement, self.eps = k, placement, float(eps)

    def make(self, dim: int) -> nn.Module:
        return GraphNormV2(dim, self.k, self.eps)

    def __repr__(self) -> str:
        return f"GraphNormV2Plugin(k={self.k}, placement={self.placement!r})"
