"""Re-key committed records after a suite drops its loss stop (``loss_threshold`` -> 0).

A run whose training loss never reached the stop ran every epoch, the same run the new protocol makes,
so its record is kept with the suite's new config and cell id; the old value and id stay in the record
(``rekeyed``).  A run the stop ended early is not the same run: it is dropped here and must come back
from a re-run without the stop (the folders passed with ``--add``; a re-run made with ``zoo bench --set
loss_threshold=0`` before the suite resolver stored such values as floats holds the integer 0, whose id differs
from the suite's 0.0, and is re-keyed the same way).
Every record written must be a cell of the shipped suite with exactly that cell's config, else nothing is
written.

Used once, at stop 34, for the suites whose papers name no loss stop: lipschitz_table1,
lipschitz_table3 and lipschitz_fig5 (§10.2: "5 times for 1000 epochs"), nonlocal_accuracy, oxford_table3,
oxford_table4 and ogb_molhiv:

    python research/rekey_loss_stop.py lipschitz_table3 --add OUT1 OUT2 ...
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

from zoo._io import write_atomic
from zoo.bench.suite.load import load_suite
from zoo.bench.suite.schema import cell_id

RECORDS = Path(__file__).resolve().parents[1] / "docs" / "reproduction" / "records"


def rekey(suite: str, added: List[Path], records: Path = RECORDS) -> str:
    folder = records / suite
    old_resolved = json.loads((folder / "suite.resolved.json").read_text())
    # a folder run at a stated-reduced protocol (zoo bench --set) keeps it: its cells are the suite's with those values
    shipped = load_suite(suite, validate_models=False, settings=old_resolved.get("set"))
    cells = {c.id: c.config for c in shipped.cells}
    old = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    kept: Dict[str, Dict[str, Any]] = {}
    dropped = rekeyed = 0
    for rec in old:
        train = rec["config"]["train"]
        if train["loss_threshold"] == 0.0:
            kept[rec["id"]] = rec
            continue
        if rec.get("stop_reason") == "converged":  # the stop ended it: not the new protocol's run
            dropped += 1
            continue
        config = copy.deepcopy(rec["config"])
        config["train"]["loss_threshold"] = 0.0
        new_id = cell_id(config)
        rec = {**rec, "config": config, "id": new_id,
               "rekeyed": {"from_id": rec["id"], "loss_threshold": train["loss_threshold"],
                           "why": f"stop_reason {rec.get('stop_reason')!r}: the loss stop never acted"}}
        kept[new_id] = rec
        rekeyed += 1
    fresh = 0
    for out in added:
        for line in (out / "results.jsonl").read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if type(rec["config"]["train"]["loss_threshold"]) is int:  # `--set loss_threshold=0` parses an int
                    config = copy.deepcopy(rec["config"])
                    config["train"]["loss_threshold"] = float(config["train"]["loss_threshold"])
                    rec = {**rec, "config": config, "id": cell_id(config),
                           "rekeyed": {"from_id": rec["id"], "loss_threshold": rec["config"]["train"]["loss_threshold"],
                                       "why": "run with --set loss_threshold=0, the integer 0: the suite's 0.0"}}
                if rec.get("status") == "ok":
                    fresh += rec["id"] not in kept
                    kept[rec["id"]] = rec
    for i, rec in kept.items():
        if cells.get(i) != rec["config"]:
            raise SystemExit(f"{suite}: record {i} is not a cell of the shipped suite with that config; "
                             "nothing written")
    resolved = shipped.resolved()
    selection = old_resolved.get("selection")
    if selection is not None:  # the folder's last slice, as `zoo bench` writes it (the page names its keys)
        resolved["selection"] = selection
    # each file replaced whole (a crash leaves the old or the new file, never half of one); a second run after a
    # crash between the two finishes the job: re-keyed records are kept as they are and the resolved suite rewritten
    write_atomic(folder / "results.jsonl", "".join(json.dumps(r) + "\n" for r in kept.values()))
    write_atomic(folder / "suite.resolved.json", json.dumps(resolved, indent=1, sort_keys=True, default=str))
    return (f"{suite}: {rekeyed} re-keyed, {dropped} dropped (stopped by the loss stop), {fresh} added, "
            f"{len(kept)} records")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("--add", nargs="*", type=Path, default=[],
                        help="zoo bench output folders to add: the re-runs, or new cells of the suite")
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records root (default: the committed one)")
    args = parser.parse_args(argv)
    print(rekey(args.suite, args.add, args.records))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
