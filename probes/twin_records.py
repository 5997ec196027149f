"""Per-seed training accuracy (%) by model and k from a results folder (results.jsonl)."""
import json
import sys
from collections import defaultdict

rows = defaultdict(dict)
for line in open(f"{sys.argv[1]}/results.jsonl"):
    r = json.loads(line)
    if r.get("status") != "ok":
        continue
    c = r["config"]
    rows[(c["model"]["name"], c["task"]["options"]["k"])][c["run"]["seed"]] = 100 * r["metrics"]["train"]
for (model, k), seeds in sorted(rows.items()):
    vals = [seeds[s] for s in sorted(seeds)]
    print(f"{model:6s} k={k}  mean {sum(vals) / len(vals):6.2f}  seeds {[round(v, 1) for v in vals]}")
