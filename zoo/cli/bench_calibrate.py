"""``zoo bench calibrate RECORDS... --out FILE``: fit the cost model on finished records, print its
leave-one-out error, write it.  A subcommand of ``zoo bench`` (:mod:`zoo.cli.bench`)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Tuple

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
    p.add_argument("--time", choices=("auto", "cpu", "wall"), default="auto",
                   help="what a cpu fit is on (default auto): each group's CPU time (group_cpu_time_s) where its "
                        "records carry it, else its wall time x the median CPU / wall share of those that do; cpu: "
                        "only the groups with a CPU time; wall: every group's wall time (records before CPU time)")
    p.set_defaults(handler=run, prog=PROG)
    return p


def run(args: argparse.Namespace) -> int:
    """Fit, print the leave-one-out errors, write (one line on stderr for unusable records)."""
    from zoo.bench.plan import calibration, cost, cost_file
    from zoo.bench.store import records

    try:
        rows = [r for path in args.records for r in records.read_records(path)]
        table = cost.load_dataset_table()
        every, basis = _observations(rows, args.device, args.time)
        obs = [o for o in every if o.mode == "train"]
        cpu = sum(o.cpu_time_s is not None for o in obs)
        basis = dataclasses.replace(basis, cpu=cpu, wall=len(obs) - cpu)  # the trained groups' counts
        per_suite = not args.no_suite_factors
        devices = sorted({str(r.get("device") or "cpu") for r in rows
                          if calibration.device_kind(r) == args.device.split(":")[0]})
        model = calibration.fit(every, table, per_suite, device=args.device,
                                fitted_on=f"{len(obs)} trained groups in {len(args.records)} records folder(s) on "
                                          + ", ".join(devices) + f"; {basis.short()}")
        notes = {"time_basis": basis.describe(), **_qualities(obs, table, per_suite)}
        cost_file.write_model([model], Path(args.out), notes)
    except (OSError, ValueError, records.CorruptRecordsError) as e:
        print(f"{PROG}: error: {os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    _print(model, notes, per_suite)
    print(f"written: {args.out} ({args.device})")
    return 0


def _observations(rows: List[Dict[str, Any]], device: str, basis: str) -> Tuple[List[Any], Any]:
    """The records' groups that ran on ``device``'s kind, on one time scale, and what it is
    (:func:`zoo.bench.plan.calibration.time_basis`; a GPU's groups on their wall time)."""
    from zoo.bench.plan import calibration

    every = calibration.observations(rows, device=device)
    if calibration.device_kind({"device": device}) != "cpu":
        if basis == "cpu":
            raise ValueError(f"--time cpu: a {device} group's cost is its wall time (its records carry no CPU time)")
        basis = "wall"
    return calibration.time_basis(every, basis)


def _qualities(obs: List[Any], table: Any, per_suite: bool) -> Dict[str, str]:
    """The leave-one-out lines of the fit (``leave_one_out...`` keys of the written entry)."""
    from zoo.bench.plan import calibration

    predicted = calibration.leave_one_out_predictions(obs, table, per_suite)
    notes = {"leave_one_out": calibration.quality([o.seconds for o in obs], predicted,
                                                  quantity=calibration.quantity(obs)).describe()}
    measured = calibration.measured_only(obs, predicted)
    if measured is not None:
        notes["leave_one_out_measured_cpu"] = measured.describe()
    if per_suite:
        notes["leave_one_out_without_suite_factors"] = calibration.leave_one_out(obs, table, False).describe()
    if per_suite and len({o.suite for o in obs}) > 1:  # a suite without records: the unseen-suite factor
        notes["leave_one_suite_out"] = calibration.leave_one_suite_out(obs, table).describe()
        plain = calibration.leave_one_suite_out(obs, table, False)
        notes["leave_one_suite_out_without_suite_factors"] = plain.describe()
    notes["leave_one_out_group_cost"] = calibration.proportional_leave_one_out(
        obs, [calibration.size_cost(o.config, o.replicas, o.epochs) for o in obs]).describe()
    return notes


def _print(model: Any, notes: Dict[str, str], per_suite: bool) -> None:
    print("coefficients (s per unit): " + ", ".join(f"{k} {v:.3g}" for k, v in model.coefficients.items()))
    print(f"times: {notes['time_basis']}")
    print(f"leave-one-out, this model{' with per-suite factors' if per_suite else ''}: {notes['leave_one_out']}")
    if "leave_one_out_measured_cpu" in notes:
        print(f"  of which the groups with a measured CPU time: {notes['leave_one_out_measured_cpu']}")
    if per_suite:
        print(f"leave-one-out, without per-suite factors: {notes['leave_one_out_without_suite_factors']}")
        print(f"factor of a suite without records: {model.unseen_suite_factor:.2f}")
    if "leave_one_suite_out" in notes:
        print("leave-one-suite-out (each suite as if it had no records; one point per suite): "
              f"{notes['leave_one_suite_out']}; with factor 1: {notes['leave_one_suite_out_without_suite_factors']}")
    print(f"leave-one-out, shards.group_cost (x a fitted scale): {notes['leave_one_out_group_cost']}")
