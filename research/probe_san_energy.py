"""Probe readings of the nonlocal paper's energies at initialisation (Tables 2/4/6).

For each reading (a choice the paper leaves open), variant and depth: the Laplacian energy of the
untrained SAN's last-layer output over seeds (float64), its geometric mean, [min, max], the
distance to the paper in log10 and how many seeds fall below the paper's number.

    python research/probe_san_energy.py base gain=1.3 gain=1.3+norm=mu --layers 2 32 128
    python research/probe_san_energy.py base --dataset citeseer --variants san_pre_ln

Readings (join with ``+``):
  base                 the suite's model (init "xavier": Xavier hidden layers, PyTorch-default
                       encoder/decoder)
  heads=H, ffn=F       attention heads, FFN width
  full_heads=H         H concatenated full-width heads (GAT-style): each head its own d x d Q / K / V
                       (Xavier), the output map H d -> d (Xavier), scores scaled by 1/sqrt(d)
  norm=R               nonlocal factor reading (``nonlocal_norm``: n, nd, none, mu)
  gain=G               hidden-layer weights Xavier with gain G (G x the default scale)
  torch_default        every Linear / LayerNorm at PyTorch's default init
  encoder_zero_bias    the encoder's biases set to zero
  graph_layernorm      the blocks' LayerNorm over the whole graph (torch_geometric's default mode)
  final_layernorm      a LayerNorm (no affine) on the measured output
  logits               measure the decoder's output instead of the last layer's
  no_self_loops        attention over the neighbours only
  input_dropout=P, dropout=P   the model's dropout rates (the encoder's input dropout; every sublayer)
  train_mode           measure in training mode, as a freshly built module is (dropout active)
Energies: ``lap`` is §2's (zoo.diagnostics.laplacian_energy), ``nomu`` drops the measure
(``(1/n) ||P X - X||^2`` with ``P = D~^-1 (A + I)``); the last columns compare ``lap``.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
from torch import nn
from torch_geometric.nn import LayerNorm as PygLayerNorm

import zoo
from zoo.bench.suite.reported import load_reported
from zoo.diagnostics import laplacian_energy
from zoo.models.transformer import GraphSelfAttention
from zoo.ops.segment import gather_rows, segment_softmax, segment_sum

REPORTED = Path(__file__).resolve().parents[1] / "benchmarks" / "suites" / "reported" / "nonlocal_energy.json"


def paper_energies() -> Dict[str, Dict[str, Dict[int, float]]]:
    """The paper's Tables 2/4/6 as shipped with the nonlocal_energy suite: dataset -> model -> L -> value."""
    out: Dict[str, Dict[str, Dict[int, float]]] = {}
    for e in load_reported(REPORTED)["entries"]:
        out.setdefault(e["dataset"], {}).setdefault(e["model"], {})[e["num_layers"]] = e["value"]
    return out


def _hidden_linears(model) -> List[nn.Linear]:
    return [m for layer in model.layers for m in layer.modules() if isinstance(m, nn.Linear)]


def _gain(g: float) -> Callable:
    def apply(model):
        for lin in _hidden_linears(model):
            nn.init.xavier_uniform_(lin.weight, gain=g)
    return apply


def _torch_default(model):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.LayerNorm)):
            m.reset_parameters()


def _encoder_zero_bias(model):
    for m in model.encoder.modules():
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.bias)


def _graph_layernorm(model):
    # PyG's LayerNorm in its default "graph" mode: one mean and std over the whole graph (no affine at init)
    for layer in model.layers:
        dim = layer.norm1.normalized_shape[0]
        layer.norm1, layer.norm2 = (PygLayerNorm(dim, affine=False, mode="graph") for _ in range(2))


class FullWidthHeads(nn.Module):
    """``(P_1 X V_1 || ... || P_H X V_H) W`` with every ``V_i`` d x d (the output of H heads is H d wide)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.dim = dim
        self.qkv = nn.ModuleList(nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(3)) for _ in range(heads))
        self.out = nn.Linear(heads * dim, dim, bias=False)
        for lin in [*(m for head in self.qkv for m in head), self.out]:
            nn.init.xavier_uniform_(lin.weight)

    def forward(self, graph, x):
        n, src, dst = graph.num_nodes, graph.src, graph.dst
        outs, alphas = [], []
        for q, k, v in self.qkv:
            scores = (gather_rows(q(x), dst) * gather_rows(k(x), src)).sum(-1, keepdim=True) / math.sqrt(self.dim)
            alpha = segment_softmax(scores, dst, n)
            outs.append(segment_sum(alpha * gather_rows(v(x), src), dst, n))
            alphas.append(alpha)
        return self.out(torch.cat(outs, -1)), torch.cat(alphas, -1)


def _full_heads(heads: int) -> Callable:
    def apply(model):
        for layer in model.layers:
            for name, child in list(layer.named_children()):
                if isinstance(child, GraphSelfAttention):
                    if child.nonlocal_energy:
                        raise SystemExit("full_heads=H reads Pre-LN / Post-LN only (it has no nonlocal factor)")
                    setattr(layer, name, FullWidthHeads(child.dim, heads).to(next(child.parameters()).dtype))
    return apply


def _no_self_loops(model):
    model.self_loops = "remove"


def parse(reading: str) -> Dict:
    spec: Dict = {"kwargs": {}, "edits": []}
    for part in reading.split("+"):
        key, _, value = part.partition("=")
        if key == "base":
            continue
        if key in ("heads", "ffn"):
            spec["kwargs"]["heads" if key == "heads" else "ffn_dim"] = int(value)
        elif key in ("input_dropout", "dropout"):
            spec["kwargs"][key] = float(value)
        elif key == "train_mode":
            spec["train_mode"] = True
        elif key == "norm":
            spec["kwargs"]["nonlocal_norm"] = value
        elif key == "gain":
            spec["edits"].append(_gain(float(value)))
        elif key == "full_heads":
            spec["edits"].insert(0, _full_heads(int(value)))  # before any gain edit, which then reaches them
        elif key in ("torch_default", "encoder_zero_bias", "graph_layernorm", "no_self_loops"):
            spec["edits"].append(globals()["_" + key])
        elif key in ("final_layernorm", "logits"):
            spec[key] = True
        else:
            raise SystemExit(f"unknown reading {part!r} (see the module docstring)")
    return spec


def measure(spec: Dict, variant: str, num_layers: int, seed: int, edge_index, x, out_dim: int) -> Dict[str, float]:
    torch.manual_seed(seed)
    kwargs = dict(spec["kwargs"])
    if variant != "san_nonlocal":
        kwargs.pop("nonlocal_norm", None)
    model = zoo.build(variant, in_dim=x.size(1), out_dim=out_dim, hidden_dim=32, num_layers=num_layers,
                      **kwargs).double()
    for edit in spec["edits"]:
        edit(model)
    model.train(bool(spec.get("train_mode")))
    captured = {}
    hook = model.taps[num_layers - 1].register_forward_hook(lambda _m, _i, o: captured.setdefault("x", o))
    with torch.no_grad():
        logits = model(edge_index, x)
    hook.remove()
    out = logits if spec.get("logits") else captured["x"]
    if spec.get("final_layernorm"):
        out = nn.functional.layer_norm(out, out.shape[-1:])
    # nomu: (1/n) sum_i |Delta X(i)|^2 = lap with mu_i removed; from the same pieces as lap
    # P = D~^-1 (A + I) on the symmetrised graph, sparse: a dense n x n matrix is 3 GB on PubMed
    n = x.size(0)
    pairs = torch.cat([edge_index, edge_index.flip(0), torch.arange(n).repeat(2, 1)], 1)
    pairs = torch.unique(pairs[0] * n + pairs[1])
    row, col = pairs // n, pairs % n
    summed = torch.zeros_like(out).index_add_(0, row, out[col])
    delta = summed / torch.bincount(row, minlength=n).unsqueeze(1).to(out.dtype) - out
    return {"lap": float(laplacian_energy(edge_index, out)), "nomu": float(delta.pow(2).sum() / x.size(0))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("readings", nargs="+")
    paper_values = paper_energies()
    ap.add_argument("--dataset", default="cora", choices=sorted(paper_values))
    ap.add_argument("--variants", nargs="+", default=["san_pre_ln", "san_post_ln", "san_nonlocal"])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 32, 128])
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    task = zoo.datasets.load(args.dataset)
    edge_index, x = task.data.edge_index, task.data.x.double()
    print("reading\tvariant\tL\tpaper\tlap_geomean\tnomu_geomean\tlap_min\tlap_max\tdlog10\tseeds_below")
    for reading in args.readings:
        spec = parse(reading)
        for variant in args.variants:
            for num_layers in args.layers:
                t0 = time.perf_counter()
                runs = [measure(spec, variant, num_layers, s, edge_index, x, task.num_classes) for s in range(args.seeds)]
                geo = {k: math.exp(sum(math.log(r[k]) for r in runs) / len(runs)) for k in runs[0]}
                lap = [r["lap"] for r in runs]
                paper = paper_values[args.dataset][variant].get(num_layers, float("nan"))
                print(f"{reading}\t{variant}\t{num_layers}\t{paper:.3g}\t{geo['lap']:.3g}\t{geo['nomu']:.3g}\t"
                      f"{min(lap):.3g}\t{max(lap):.3g}\t{math.log10(geo['lap'] / paper):+.2f}\t"
                      f"{sum(v < paper for v in lap)}/{len(lap)}\t({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
