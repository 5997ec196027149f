"""Fingerprints of every model the committed records built: one line per distinct ``build_config``
of ``docs/reproduction/records/*/results.jsonl`` with the SHA-256 of its parameters (names, shapes,
values) after ``zoo.build`` under a fixed seed, and of its outputs on a small seeded graph (in
evaluation mode, and in training mode under a fixed seed, so dropout is covered).

Run it before and after a refactoring of the model side and compare the two files: a refactoring
that keeps behaviour keeps every line::

    python research/build_fingerprints.py > before.jsonl   # on the old commit
    python research/build_fingerprints.py > after.jsonl    # on the new one
    diff before.jsonl after.jsonl && echo same

``--limit N`` fingerprints the first N configs only (sorted by their JSON).
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Tuple

import torch

import zoo

ROOT = Path(__file__).resolve().parents[1]
NODES, EDGES = 12, 40


def build_configs() -> Iterator[Tuple[str, Dict[str, Any]]]:
    seen = set()
    for path in sorted(glob.glob(str(ROOT / "docs/reproduction/records/*/results.jsonl"))):
        for line in open(path):
            config = json.loads(line).get("build_config")
            if config is not None:
                seen.add(json.dumps(config, sort_keys=True))
    for key in sorted(seen):
        yield key, json.loads(key)


def digest(tensors: Iterator[Tuple[str, torch.Tensor]]) -> str:
    h = hashlib.sha256()
    for name, t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()[:16]


def inputs(model: torch.nn.Module, config: Dict[str, Any]) -> Dict[str, Any]:
    g = torch.Generator().manual_seed(1)
    edge_index = torch.randint(0, NODES, (2, EDGES), generator=g)
    if config.get("input_encoder") == "atom":
        x = torch.zeros(NODES, 9, dtype=torch.long)
    else:
        x = torch.randn(NODES, config["in_dim"], generator=g)
    out: Dict[str, Any] = {"graph": edge_index, "x": x}
    if config.get("edge_encoder") == "bond":
        out["edge_attr"] = torch.zeros(EDGES, 3, dtype=torch.long)
    elif config.get("edge_encoder"):
        out["edge_attr"] = torch.randn(EDGES, config["edge_dim"], generator=g)
    return out


def fingerprint(config: Dict[str, Any]) -> Dict[str, str]:
    options = {k: v for k, v in config.items() if k not in ("name", "preset")}
    name = config["name"] + (f".{config['preset']}" if config.get("preset") else "")
    torch.manual_seed(0)
    model = zoo.build(name, **options)
    data = inputs(model, config)
    model.eval()
    with torch.no_grad():
        evaluated = model(**data)
    model.train()
    torch.manual_seed(2)
    with torch.no_grad():
        trained = model(**data)
    return {"params": digest(iter(model.state_dict().items())),
            "eval": digest(iter([("out", evaluated)])), "train": digest(iter([("out", trained)]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    for index, (key, config) in enumerate(build_configs()):
        if args.limit is not None and index >= args.limit:
            break
        try:
            result = fingerprint(config)
        except Exception as e:  # a config the code refuses: that is a fingerprint too
            result = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps({"config": key, **result}, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
