"""Input and edge encoder plugins: raw node / edge features -> the width the first layer reads.

``zoo.build("gatv2", in_dim=9, out_dim=64, input_encoder="atom", edge_encoder="bond")``
embeds OGB's categorical molecule features the OGB way (one embedding table per column,
summed: ``ogb.graphproppred.mol_encoder.AtomEncoder`` / ``BondEncoder``).  The encoder's
output width is the model's ``hidden_dim``, so layer 1 reads ``hidden_dim`` features; ``in_dim``
stays the number of *raw* feature columns (9 atom / 3 bond codes for OGB molecules).

Plugins are looked up by normalised name (``"Atom"``, ``"atom-encoder"`` ...); an unknown
name lists the near matches.  A plugin is a factory ``(in_dim, out_dim) -> nn.Module``
mapping ``(rows, in_dim)`` to ``(rows, out_dim)``.

Edge features follow the edges through the self-loop policy (:func:`align_edge_features`):
a removed self-loop drops its row, and an added self-loop gets the mean of the features of
the node's incoming edges, as PyG's ``GATConv``/``GATv2Conv`` (``fill_value="mean"``) do.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import torch
from torch import Tensor, nn

from zoo._names import Registry
from zoo._ogb import ogb_module

EncoderFactory = Callable[[Optional[int], int], nn.Module]

#: :mod:`zoo.papers` registers one paper's encoders here: imported before the first lookup
INPUT_ENCODERS: Registry[EncoderFactory] = Registry("input encoder", populate=("zoo.papers",))
EDGE_ENCODERS: Registry[EncoderFactory] = Registry("edge encoder", populate=("zoo.papers",))


def _ogb_dims(kind: str) -> List[int]:
    from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims

    return list(get_atom_feature_dims() if kind == "atom" else get_bond_feature_dims())


class CategoricalEncoder(nn.Module):
    """Wraps OGB's ``AtomEncoder``/``BondEncoder``: one embedding per categorical column, summed.

    The benchmark runner casts node features to the run's float dtype, so integer codes may
    arrive as floats; they are exact small integers and are turned back into indices here.

    Shapes: ``(rows, columns)`` integer codes -> ``(rows, out_dim)``.
    """

    def __init__(self, kind: str, in_dim: Optional[int], out_dim: int) -> None:
        super().__init__()
        encoders = ogb_module("ogb.graphproppred.mol_encoder")

        # The atom encoder's in_dim (the model's) is not checked here (suites dry-build models on toy
        # sizes); forward checks the data.  An edge_dim given to the bond encoder would change nothing.
        self.dims = _ogb_dims(kind)
        if kind == "bond" and in_dim is not None and in_dim != len(self.dims):
            raise ValueError(f"the 'bond' encoder reads OGB's {len(self.dims)} bond columns, so edge_dim={in_dim} "
                             "would change nothing; drop edge_dim, or use edge_encoder='linear' for other features")
        self.kind, self.in_dim, self.out_dim = kind, len(self.dims), out_dim
        self.encoder = (encoders.AtomEncoder if kind == "atom" else encoders.BondEncoder)(out_dim)

    def forward(self, codes: Tensor) -> Tensor:
        if codes.dim() != 2 or codes.size(1) != self.in_dim:
            raise ValueError(
                f"the {self.kind!r} encoder embeds OGB's {self.in_dim} {self.kind} feature columns, but got features "
                f"of shape {tuple(codes.shape)}; use it on OGB molecule data (ogbg_molhiv) or pick another "
                "encoder (e.g. 'linear')"
            )
        if codes.is_floating_point():
            if codes.numel() and not bool((codes == codes.round()).all()):
                raise ValueError(f"the {self.kind!r} encoder reads integer category codes, but got non-integer "
                                 f"values (dtype {codes.dtype}); pass the dataset's raw codes (e.g. x.long()) or "
                                 "pick the 'linear' encoder for continuous features")
            codes = codes.round().long()
        elif codes.dtype == torch.bool or codes.is_complex():
            raise TypeError(f"the {self.kind!r} encoder reads integer category codes, got dtype {codes.dtype}")
        self._check_range(codes)
        return self.encoder(codes)

    def _check_range(self, codes: Tensor) -> None:
        # An out-of-range code would be an IndexError deep inside nn.Embedding (a device assert on CUDA).
        if not codes.numel():
            return
        sizes = torch.tensor(self.dims, device=codes.device)
        bad = (codes < 0) | (codes >= sizes)
        if bool(bad.any()):
            row, col = (int(v) for v in bad.nonzero()[0])
            raise ValueError(
                f"the {self.kind!r} encoder got code {int(codes[row, col])} in column {col} (row {row}), but OGB's "
                f"{self.kind} column {col} has codes 0..{self.dims[col] - 1}; pass OGB's raw {self.kind} features "
                "(ogb.utils.smiles2graph) unchanged"
            )


class LinearEncoder(nn.Linear):
    """A learnt linear map of continuous features, ``W x`` (``bias=True``: ``W x + b``; registered as
    ``"affine"`` by :mod:`zoo.papers.lipschitz`), with PyTorch's default ``nn.Linear`` init.
    Shapes: ``(rows, in_dim) -> (rows, out_dim)``."""

    def __init__(self, in_dim: Optional[int], out_dim: int, bias: bool = False) -> None:
        if in_dim is None:
            name = "affine" if bias else "linear"
            raise ValueError(f"the {name!r} encoder needs the number of raw feature columns (edge_dim for edges)")
        super().__init__(in_dim, out_dim, bias=bias)


INPUT_ENCODERS.add("atom", lambda i, o: CategoricalEncoder("atom", i, o), aliases=("atom_encoder", "ogb_atom"))
INPUT_ENCODERS.add("linear", LinearEncoder)
EDGE_ENCODERS.add("bond", lambda i, o: CategoricalEncoder("bond", i, o), aliases=("bond_encoder", "ogb_bond"))
EDGE_ENCODERS.add("linear", LinearEncoder)


def make_encoder(kind: str, name: Union[None, str, nn.Module], in_dim: Optional[int], out_dim: int) -> Optional[nn.Module]:
    """Build the ``kind`` (``"input"``/``"edge"``) encoder ``name`` (``None``: no encoder; a module is used as is)."""
    if name is None or isinstance(name, nn.Module):
        return name
    registry = INPUT_ENCODERS if kind == "input" else EDGE_ENCODERS
    return registry.create(name, in_dim, out_dim)


def list_encoders() -> Dict[str, List[str]]:
    return {"input": INPUT_ENCODERS.names(), "edge": EDGE_ENCODERS.names()}


def check_edge_features(owner: str, edge_attr: Any, encoder: nn.Module, num_edges: int,
                        scan_values: bool = True) -> None:
    """One line for every way raw edge features can be wrong, before the encoder meets them.

    ``edge_attr`` must be a tensor with one row per column of the graph's own edge index
    (``num_edges``), as wide as the encoder reads, and (floating, unless ``scan_values`` is off)
    free of NaN/inf — a NaN would otherwise spread silently through the attention scores.
    """
    if not isinstance(edge_attr, Tensor):
        raise TypeError(f"{owner}: edge_attr must be a torch.Tensor of shape (E, edge_dim), got "
                        f"{type(edge_attr).__name__}")
    width = getattr(encoder, "in_features", None)
    if width is None:
        width = getattr(encoder, "in_dim", None)
    # A plugin module of the user's own reads whatever it reads: only the row count is checked then.
    if edge_attr.dim() == 0 or (isinstance(width, int) and (edge_attr.dim() != 2 or edge_attr.size(1) != width)):
        hint = " (a 1-D tensor: pass edge_attr.unsqueeze(-1))" if edge_attr.dim() == 1 and width == 1 else ""
        raise ValueError(f"{owner}: edge_attr must have shape (E, {width if width is not None else 'edge_dim'}), "
                         f"got {tuple(edge_attr.shape)}{hint}; build the model with edge_dim=edge_attr.size(1) "
                         "or pass the matching edge features")
    if edge_attr.size(0) != num_edges:
        raise ValueError(f"{owner}: edge_attr has {edge_attr.size(0)} rows but the graph has {num_edges} edges; "
                         "pass one row per edge, in the order of the graph's own edge list")
    if isinstance(encoder, nn.Linear) and not edge_attr.is_floating_point():
        raise TypeError(f"{owner}: the linear edge encoder reads continuous features, got dtype "
                        f"{edge_attr.dtype}; pass edge_attr.float() (category codes need edge_encoder='bond')")
    if scan_values and edge_attr.is_floating_point() and edge_attr.numel() and not bool(torch.isfinite(edge_attr).all()):
        bad = (~torch.isfinite(edge_attr)).nonzero()
        row, col = (int(v) for v in bad[0])
        raise ValueError(
            f"{owner}: edge features contain {bad.size(0)} NaN/inf value(s) (first at row {row}, column {col}: "
            f"{edge_attr[row, col].item()}); clean them (e.g. torch.nan_to_num) or skip this check with "
            "zoo.build(..., check_inputs=False) / ZOO_CHECK_INPUTS=0"
        )


def align_edge_features(edge_index: Tensor, num_nodes: int, policy: str, edge_attr: Tensor) -> Tensor:
    """Rows of ``edge_attr`` (one per column of the *raw* ``edge_index``) in the order of the
    normalised graph that :func:`zoo.graph.as_graph` builds with ``policy``.

    Mirrors ``zoo.graph._apply_policy`` step for step (drop self-loops unless ``keep``; with
    ``add`` append one loop per node, its features the mean over the node's incoming edges;
    stable sort by ``(dst, src)``).  Shapes: ``(2, E0)``, ``(E0, D)`` -> ``(E, D)``.
    """
    if edge_attr.size(0) != edge_index.size(1):
        raise ValueError(f"edge features have {edge_attr.size(0)} rows but the graph has {edge_index.size(1)} "
                         "edges; pass one row per column of edge_index")
    ei, attr = edge_index.long(), edge_attr
    if policy != "keep":
        keep = ei[0] != ei[1]
        ei, attr = ei[:, keep], attr[keep]
        if policy == "add":
            dst = ei[1]
            total = attr.new_zeros((num_nodes,) + tuple(attr.shape[1:])).index_add(0, dst, attr)
            count = torch.zeros(num_nodes, dtype=attr.dtype, device=attr.device).index_add(
                0, dst, torch.ones_like(dst, dtype=attr.dtype))
            loops = total / count.clamp(min=1).view(-1, *([1] * (attr.dim() - 1)))
            loop_index = torch.arange(num_nodes, device=ei.device).expand(2, num_nodes)
            ei, attr = torch.cat([ei, loop_index], 1), torch.cat([attr, loops], 0)
    order = torch.argsort(ei[1] * num_nodes + ei[0], stable=True)
    return attr.index_select(0, order)


__all__ = ["INPUT_ENCODERS", "EDGE_ENCODERS", "CategoricalEncoder", "LinearEncoder", "make_encoder",
           "list_encoders", "check_edge_features", "align_edge_features"]
