"""The plain PyG model the speed benchmarks compare the zoo with: what a user would write.

A stack of ``GATv2Conv`` (shared weights) / ``GATConv`` / ``GCNConv`` layers without biases, ReLU
between them, the hidden heads concatenated and the output heads averaged — the zoo's
architecture for the same configuration.  Imported by ``speed_train.py`` and ``speed_process.py``;
it imports torch and PyG only (no zoo), so a process timing the PyG side pays no zoo import.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def pyg_model(c: dict, in_dim: int, out_dim: int) -> torch.nn.Module:
    """``c``: ``model`` (gatv2 / gat / gcn), ``layers``, ``hidden``, ``heads``."""
    from torch_geometric.nn import GATConv, GATv2Conv, GCNConv

    heads, layers = c["heads"], c["layers"]

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            convs = []
            for i in range(layers):
                last = i == layers - 1
                d_in = in_dim if i == 0 else c["hidden"]
                if c["model"] == "gcn":
                    convs.append(GCNConv(d_in, out_dim if last else c["hidden"], bias=False))
                    continue
                conv = GATv2Conv if c["model"] == "gatv2" else GATConv
                kw = dict(share_weights=True) if c["model"] == "gatv2" else {}
                convs.append(conv(d_in, out_dim if last else c["hidden"] // heads, heads=heads,
                                  concat=not last, bias=False, **kw))
            self.convs = torch.nn.ModuleList(convs)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < layers - 1:
                    x = F.relu(x)
            return x

    return Net()
