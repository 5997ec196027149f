"""``zoo bench calibrate RECORDS... [--bridge DIR...] --out FILE``: fit the cost model on finished records,
print its leave-one-out error and the machines the records ran on, write it.  A subcommand of ``zoo bench``
(:mod:`zoo.cli.bench`)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Sequence, Tuple

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
    p.add_argument("--bridge", nargs="+", action="extend", default=[], type=user_path, metavar="DIR",
                   help="bridge folders (after the records): not fitted on (also when given as records), they set "
                        "machine factors. The model prices the machine of most fitted groups (their records' "
                        "float_order: cpu, with or without avx512f); a bridge is a shape run by one commit on another "
                        "machine and on that one (probe pairs: two epoch caps in one results.jsonl, or single groups "
                        "of equal epochs), its factor that machine's CPU-s per replica-epoch over the reference's. "
                        "Each fitted group of a bridged machine is divided by its shape's factor, else by the median "
                        "of its machine's; machines without a bridge stay at face value")
    p.set_defaults(handler=run, prog=PROG)
    return p


def run(args: argparse.Namespace) -> int:
    """Fit, print the leave-one-out errors, write (one line on stderr for unusable records)."""
    from zoo.bench.plan import bridges, calibration, cost, cost_file
    from zoo.bench.store import records

    try:
        fitted, bridge_folders = _folders(args.records, args.bridge)
        if bridge_folders and calibration.device_kind({"device": args.device}) != "cpu":
            raise ValueError("--bridge: machine factors are for a cpu fit (its groups' CPU time)")
        rows = [r for path in fitted for r in records.read_records(path)]
        table = cost.load_dataset_table()
        raw = calibration.observations(rows, device=args.device)
        machines = bridges.find_bridges(raw, {b: calibration.observations(records.read_records(b), device=args.device)
                                              for b in bridge_folders})
        every, basis = _observations(machines.normalise(raw), args.device, args.time)
        obs = [o for o in every if o.mode == "train"]
        cpu = sum(o.cpu_time_s is not None for o in obs)
        basis = dataclasses.replace(basis, cpu=cpu, wall=len(obs) - cpu)  # the trained groups' counts
        per_suite = not args.no_suite_factors
        devices = sorted({str(r.get("device") or "cpu") for r in rows
                          if calibration.device_kind(r) == args.device.split(":")[0]})
        priced = f"; priced on {machines.reference} ({len(machines.bridges)} bridges)" if bridge_folders else ""
        model = calibration.fit(every, table, per_suite, device=args.device,
                                fitted_on=f"{len(obs)} trained groups in {len(fitted)} records folder(s) on "
                                          + ", ".join(devices) + f"; {basis.short()}{priced}")
        notes = {"time_basis": basis.describe(), **_qualities(obs, table, per_suite)}
        if bridge_folders:
            notes["machines"] = "; ".join(machines.summary(raw))
        cost_file.write_model([model], Path(args.out), notes)
    except (OSError, ValueError, records.CorruptRecordsError) as e:
        print(f"{PROG}: error: {os_error(e) if isinstance(e, OSError) else e}", file=sys.stderr)
        return EXIT_ERROR
    _print(model, notes, per_suite)
    _print_machines(machines, raw, len(args.records) - len(fitted), len(bridge_folders))
    print(f"written: {args.out} ({args.device})")
    return 0


def _folder(path: str) -> Path:
    """A records argument as the folder it reads (``DIR`` or ``DIR/results.jsonl``), resolved."""
    p = Path(path)
    return (p.parent if p.name == "results.jsonl" else p).resolve()


def _folders(paths: Sequence[str], bridge: Sequence[str]) -> Tuple[List[str], List[str]]:
    """``(records to fit, bridge folders)``: a folder given both ways is a bridge only (a reference machine's
    probe of a shape re-probed on another machine: the new probe is fitted, the old one bridges), each once."""
    bridges: Dict[Path, str] = {}
    for b in bridge:
        bridges.setdefault(_folder(b), b)
    fitted = [p for p in paths if _folder(p) not in bridges]
    if bridges and not fitted:
        raise ValueError("--bridge: every records folder is a bridge folder: nothing left to fit")
    return fitted, list(bridges.values())


def _print_machines(machines: Any, raw: List[Any], excluded: int, bridge_folders: int) -> None:
    """Per machine of the fitted groups: how many, and how they were priced (:meth:`MachineFactors.summary`)."""
    folders = f"; {bridge_folders} bridge folder(s), {excluded} of them also given as records (not fitted)" \
        if bridge_folders else ""
    print(f"machines (groups of the fitted records{folders}):")
    for line in machines.summary(raw):
        print(f"  {line}")


def _observations(every: List[Any], device: str, basis: str) -> Tuple[List[Any], Any]:
    """The groups (of records that ran on ``device``'s kind) on one time scale, and what it is
    (:func:`zoo.bench.plan.calibration.time_basis`; a GPU's groups on their wall time)."""
    from zoo.bench.plan import calibration

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
