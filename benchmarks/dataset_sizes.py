"""Write ``zoo/bench/plan/dataset_sizes.json``: the sizes the cost model reads (zoo.bench.plan.cost).

The cost model is torch-free and loads no data, so the sizes it needs — nodes, edges, input
features and their density (the first layer multiplies a sparse bag-of-words input as CSR), classes,
graphs, the training graphs' share of the nodes, and a real dataset's raw files with whether the mirror
has them (the reproduction report's *data absent here*) — are measured here once, by loading each dataset
the suites use. Real datasets are keyed by name (their size does not depend on the split);
generated ones (``trees``, ``twin``) by name and options, one entry per suite setting.

    ZOO_DATA_MIRROR=/path/to/datasets python benchmarks/dataset_sizes.py [--only NAME]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from zoo.bench.suite.load import list_suites, load_suite
from zoo.datasets import MissingDataError, get_spec, load
from zoo.datasets.mirror import mirrored

OUT = Path(__file__).resolve().parents[1] / "zoo" / "bench" / "plan" / "dataset_sizes.json"


def measure(task) -> dict:
    if task.data is not None:  # one graph
        d = task.data
        x = d.x
        return {"kind": "transductive", "nodes": int(d.num_nodes), "edges": int(d.edge_index.size(1)),
                "features": int(x.size(1)), "density": round(float((x != 0).float().mean()), 5),
                "classes": int(task.num_classes), "graphs": 1, "train_share": 1.0}
    nodes = edges = nnz = train = graphs = 0
    f = 1
    for split in ("train", "val", "test"):
        for g in task.graphs[split]:  # one at a time: generated graphs are built on access
            nodes += int(g.num_nodes)
            edges += int(g.edge_index.size(1))
            nnz += int((g.x != 0).sum())
            f = int(g.x.size(1)) if g.x.dim() == 2 else 1
            graphs += 1
            train += int(g.num_nodes) if split == "train" else 0
    return {"kind": "graph" if task.kind == "graph" else "inductive", "nodes": nodes, "edges": edges, "features": f,
            "density": round(nnz / max(nodes * f, 1), 5), "classes": int(task.num_classes), "graphs": graphs,
            "train_share": round(train / max(nodes, 1), 4)}


def trees(depth: int, num_trees: int = 5000, train_fraction: float = 0.8) -> dict:
    """Tree-NeighborsMatch counted, not built (depth 10 is 5000 x 2047 x 2048 features: 80 GB)."""
    leaves = 2 ** depth
    n = 2 * leaves - 1
    return {"kind": "inductive", "nodes": n * num_trees, "edges": (n - 1) * num_trees, "features": 2 * leaves,
            "density": round((2 * leaves + 1) / (n * 2 * leaves), 7), "classes": leaves, "graphs": num_trees,
            "train_share": train_fraction}


def registry_only(name: str) -> dict:
    """A dataset whose files are absent here: the registry's counts; density unknown (None)."""
    stats = get_spec(name).stats
    return {"kind": "transductive", "nodes": stats["nodes"], "edges": stats["edges"], "features": stats["features"],
            "density": None, "classes": stats["classes"], "graphs": 1, "train_share": 1.0, "measured": False}


def raw_files_entry(name: str) -> dict:
    """A real dataset's raw files and whether the data mirror (``$ZOO_DATA_MIRROR``) has them all: the
    reproduction report calls a pending cell of an unmirrored dataset *data absent here*."""
    raw = list(get_spec(name).raw_files)
    return {"raw_files": raw, "mirrored": mirrored(raw)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    table = json.loads(OUT.read_text())["datasets"] if OUT.exists() else {}
    wanted = {}
    for name in list_suites():
        for cell in load_suite(name).cells:
            t = cell.config["task"]
            synthetic = get_spec(t["dataset"]).synthetic
            key = t["dataset"] if not synthetic or not t["options"] else \
                f"{t['dataset']} {json.dumps(t['options'], sort_keys=True)}"
            wanted.setdefault(key, (t, synthetic))
    for key, (t, synthetic) in sorted(wanted.items()):
        if key in table and not synthetic:
            table[key].update(raw_files_entry(t["dataset"]))
        if key in table or (args.only and t["dataset"] != args.only):
            continue
        if t["dataset"] == "trees":
            table[key] = trees(**t["options"])
        else:
            try:
                table[key] = measure(load(t["dataset"], **(t["options"] if synthetic else {})))
            except MissingDataError:
                table[key] = registry_only(t["dataset"])
        if not synthetic:
            table[key].update(raw_files_entry(t["dataset"]))
        print(key, table[key], flush=True)
        write(table)
    write(table)
    return 0


def write(table: dict) -> None:
    OUT.write_text(json.dumps({"about": __doc__.splitlines()[0], "datasets": table}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    torch.set_num_threads(1)
    raise SystemExit(main())
