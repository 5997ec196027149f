"""Minesweeper with its edges as stored (the dynamic-rescaling and GATE code) vs symmetrised.

The heterophilous npz files store each undirected pair once (minesweeper: 39,402 pairs, all
``i < j``).  The authors' ``getDataHet`` uses ``edge_index = edges.t()`` unchanged, so a PyG layer
sends messages one way only and a node hears about 4 of its 8 grid neighbours.  This probe trains
the rescaling suite's model (GATv2, shared weights, 5 layers, width 64, one head, ReLU, no bias,
LL-orthogonal init, Adam 0.01, stored split 0, 200 epochs, best validation ROC-AUC) twice per edge
mode: with ``zoo.fit`` and with a plain PyG ``GATv2Conv`` stack (PyG's default init) as an
independent reference.  Run from the repository root:

    ZOO_DATA_MIRROR=../shared/datasets python research/probe_minesweeper_edges.py

Result (2026-11-28, seed 0; test ROC-AUC at the best validation epoch):

==============  ========  ==========================
edges           zoo.fit   PyG GATv2Conv reference
==============  ========  ==========================
as stored       0.515     0.519
undirected      0.771     0.736
==============  ========  ==========================

With the edges as stored neither implementation gets past chance in 200 epochs. This is why
the rescaling suite's 500-epoch slice stays at ROC-AUC 0.50-0.52 in every variant.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Dict

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

import zoo

MODEL = dict(num_layers=5, hidden_dim=64, heads=1, activation="relu", bias=False, share_weights=True,
             init="ll_orthogonal", split=0)


def zoo_test_auc(edges: str, epochs: int = 200) -> float:
    h = zoo.fit("gatv2", "minesweeper", optimizer="adam", lr=0.01, epochs=epochs, seeds=[0], edges=edges,
                progress=False, **MODEL)
    return float(h.final[0]["test"])


def pyg_test_auc(edge_index: torch.Tensor, data: Dict[str, torch.Tensor], epochs: int = 200) -> float:
    from torch_geometric.nn import GATv2Conv

    torch.manual_seed(0)
    dims = [data["x"].size(1)] + [64] * 4 + [2]
    convs = torch.nn.ModuleList(GATv2Conv(a, b, heads=1, share_weights=True, bias=False)
                                for a, b in zip(dims[:-1], dims[1:]))

    def forward() -> torch.Tensor:
        x = data["x"]
        for i, conv in enumerate(convs):
            x = conv(x, edge_index)
            x = F.relu(x) if i < len(convs) - 1 else x
        return x

    opt = torch.optim.Adam(convs.parameters(), lr=0.01)
    y, tr, va, te = data["y"], data["train"], data["val"], data["test"]
    best_val, test = -1.0, float("nan")
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(forward()[tr], y[tr]).backward()
        opt.step()
        with torch.no_grad():
            p = forward().softmax(-1)[:, 1]
        val = roc_auc_score(y[va], p[va])
        if val > best_val:
            best_val, test = val, roc_auc_score(y[te], p[te])
    return float(test)


def main() -> None:
    from torch_geometric.utils import to_undirected

    mirror = os.environ.get("ZOO_DATA_MIRROR")
    if not mirror:
        raise SystemExit("set ZOO_DATA_MIRROR to the dataset mirror (../shared/datasets)")
    raw = np.load(Path(mirror) / "heterophilous" / "minesweeper" / "raw" / "minesweeper.npz")
    e = torch.tensor(raw["edges"]).t().contiguous()
    data = {"x": torch.tensor(raw["node_features"], dtype=torch.float), "y": torch.tensor(raw["node_labels"])}
    for key in ("train", "val", "test"):
        data[key] = torch.tensor(raw[f"{key}_masks"][0], dtype=torch.bool)
    print(f"stored pairs {e.size(1)}, with i < j: {float((e[0] < e[1]).float().mean()):.3f}")
    for name, edges, index in [("as stored", "as_stored", e), ("undirected", "undirected", to_undirected(e))]:
        print(f"{name:11s} zoo.fit {zoo_test_auc(edges):.3f}  PyG reference {pyg_test_auc(index, data):.3f}", flush=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
