"""``zoo bench calibrate RECORDS... --out FILE``: fit the cost model on finished records, print its
leave-one-out error, write it.  A subcommand of ``zoo bench`` (:mod:`zoo.cli.bench`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from zoo.cli.args import user_path
from zoo.cli.errors import EXIT_ERROR, os_error

PROG = "zoo bench calibrate"
DESCRIPTION = "fit the cost model (zoo.bench.plan.calibration) on finished records"


class _Parser(argparse.ArgumentParser):
    """Its errors say how to run a suite file that happens to be called ``calibrate``."""

    def error(self, message: str) -> NoReturn:
        super().error(f"{message} (`{PROG}` fits the cost model; to run a suite file named calibrate, "
                      "give its path: zoo bench ./calibrate.toml)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=DESCRIPTION)
    p.add_argument("records", nargs="+", type=user_path, help="results folders or results.jsonl files")
    p.add_argument("--out", required=True, type=user_path, help="cost-model JSON to write (its other devices' entries are kept)")
    p.add_argument("--device", default="cpu",
                   help="the device kind to fit (default cpu): only the records that ran on it count")
    p.add_argument("--no-suite-factors", action="store_true", help="fit one model for every suite")
    p.set_defaults(handler=run, prog=PROG)
    return p


def run(args: argparse.Namespace) -> int:
    """Fit, print the leave-one-out errors, write (one line on stderr for unusable records)."""
    from zoo.bench.plan import calibration, cost, cost_file
    from zoo.bench.store import records

    try:
        rows = [r for path in args.records for r in records.read_records(path)]
        table = cost.load_dataset_table()
        every = calibration.observations(rows, device=args.device)
        obs = [o for o in every if o.mode == "train"]
        per_suite = not args.no_suite_factors
        devices = sorted({str(r.get("device") or "cpu") for r in rows
                          if calibration.device_kind(r) == args.device.split(":")[0]})
        model = calibration.fit(every, table, per_suite, device=args.device,
                         fitted_on=f"{len(obs)} trained groups in {len(args.records)} records folder(s) on "
                                   + ", ".join(devices))
        loo = calibration.leave_one_out(obs, table, per_suite)
        plain = calibration.leave_one_out(obs, table, False) if per_suite else loo
        # a suite without records (its groups get the unseen-suite factor): needs two suites
        unseen = calibration.leave_one_suite_out(obs, table) if per_suite and len({o.suite for o in obs}) > 1 \
            else None
        unseen_plain = calibration.leave_one_suite_out(obs, table, False) if unseen is not None else None
        old = calibration.proportional_leave_one_out(
            obs, [calibration.size_cost(o.config, o.replicas, o.epochs) for o in obs])
        notes = {"leave_one_out": loo.describe(), "leave_one_out_without_suite_factors": plain.describe(),
                 "leave_one_out_group_cost": old.describe()}
        if unseen is not None:
            notes["leave_one_suite_out"] = unseen.describe()
            notes["leave_one_suite_out_without_suite_factors"] = unseen_plain.describe()
        cost_file.write_model([model], Path(args.out), notes)
    except (OSError, ValueError, records.CorruptRecordsError) as e:
        print(f"{PROG}: error: {os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    print("coefficients (s per unit): " + ", ".join(f"{k} {v:.3g}" for k, v in model.coefficients.items()))
    print(f"leave-one-out, this model{' with per-suite factors' if per_suite else ''}: {loo.describe()}")
    if per_suite:
        print(f"leave-one-out, without per-suite factors: {plain.describe()}")
        print(f"factor of a suite without records: {model.unseen_suite_factor:.2f}")
    if unseen is not None:
        print(f"leave-one-suite-out (each suite as if it had no records; one point per suite): {unseen.describe()}; "
              f"with factor 1: {unseen_plain.describe()}")
    print(f"leave-one-out, shards.group_cost (x a fitted scale): {old.describe()}")
    print(f"written: {args.out} ({args.device})")
    return 0
