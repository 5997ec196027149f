"""Machine factors for the cost model's fit (``zoo bench calibrate --bridge``): records measured on
several CPUs, priced on one.

The model prices one machine, the *reference*: the machine of most of the fitted groups
(:func:`reference_machine`).  A group measured on another machine is slower or faster by that machine's
speed on its shape, which the fit would otherwise read as the shape's (or its suite's, or its dataset's)
level.  A *bridge* identifies it: a shape (:func:`zoo.bench.plan.cost.shape_key`) run by the same commit
on the other machine and on the reference machine; its factor is the other machine's CPU time per
replica-epoch over the reference's (:func:`find_bridges`).  Each fitted group of a bridged machine is
divided by its shape's own factor where its shape was bridged, else by its machine's (the median over the
machine's bridged shapes); a machine without a bridge stays at face value.  Bridge folders only set
factors: their groups are not fitted on."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.plan.calibration import (UNKNOWN_MACHINE, Observation, per_replica_epoch, same_but_epochs,
                                        without_setup)
from zoo.bench.plan.cost import shape_key


def log_median(values: Iterable[float]) -> float:
    """The median of positive ``values`` on a log scale: with an even count, the geometric mean of the two
    middle ones, so a factor and its inverse weigh alike.  A median, not a mean: one bridge measured under
    a heavier load (which inflates a probe's CPU time) should not move the factor of every other shape."""
    return math.exp(statistics.median(math.log(v) for v in values))


@dataclass(frozen=True)
class Bridge:
    """One shape run by one commit on ``machine`` and on the reference machine."""

    machine: str
    shape: str
    commit: str
    factor: float   # the machine's CPU-s per replica-epoch / the reference machine's
    basis: str      # "pairs" (the setup-free differences of two lengths on both sides) or "N epochs"


@dataclass(frozen=True)
class MachineFactors:
    """The reference machine, and the bridges that price the others against it."""

    reference: str
    bridges: Tuple[Bridge, ...] = ()

    def shape_factors(self, machine: str) -> Dict[str, float]:
        """``{shape_key: factor}`` of ``machine``'s bridged shapes (:func:`log_median` over the commits
        that bridged a shape)."""
        by: Dict[str, List[float]] = {}
        for b in self.bridges:
            if b.machine == machine:
                by.setdefault(b.shape, []).append(b.factor)
        return {shape: log_median(v) for shape, v in sorted(by.items())}

    def machine_factor(self, machine: str) -> Optional[float]:
        """:func:`log_median` over ``machine``'s bridged shapes (one vote each); ``None`` without a bridge."""
        shapes = self.shape_factors(machine)
        return log_median(shapes.values()) if shapes else None

    def factor(self, o: Observation) -> float:
        """What ``o``'s times are divided by to be the reference machine's: its shape's factor, else its
        machine's, else 1 (the reference machine, or a machine without a bridge)."""
        if o.machine == self.reference:
            return 1.0
        own = self.shape_factors(o.machine).get(shape_key(o.config, o.suite))
        if own is not None:
            return own
        return self.machine_factor(o.machine) or 1.0

    def normalise(self, obs: Sequence[Observation]) -> List[Observation]:
        """``obs`` with each group's CPU and wall time divided by :meth:`factor` (the same objects where it is 1)."""
        out = []
        for o in obs:
            f = self.factor(o)
            out.append(o if f == 1.0 else replace(
                o, wall_time_s=o.wall_time_s / f, cpu_time_s=None if o.cpu_time_s is None else o.cpu_time_s / f))
        return out

    def summary(self, fitted: Sequence[Observation]) -> List[str]:
        """One line per machine of ``fitted`` or of the bridges: its groups, bridges and factors."""
        counts = Counter(o.machine for o in fitted)
        lines = []
        for machine in sorted(set(counts) | {b.machine for b in self.bridges},
                              key=lambda m: (m != self.reference, m == UNKNOWN_MACHINE, m)):
            n = counts.get(machine, 0)
            if machine == self.reference:
                lines.append(f"{machine}: {n} groups, the reference machine (the model prices it)")
            elif machine == UNKNOWN_MACHINE:
                lines.append(f"{machine} (records without float_order.cpu): {n} groups, at face value")
            elif not self.shape_factors(machine):
                lines.append(f"{machine}: {n} groups, no bridge: at face value")
            else:
                lines.append(self._bridged(machine, [o for o in fitted if o.machine == machine]))
        return lines

    def _bridged(self, machine: str, fitted: Sequence[Observation]) -> str:
        shapes = self.shape_factors(machine)
        factors = sorted(shapes.values())
        own = sum(shape_key(o.config, o.suite) in shapes for o in fitted)
        count = sum(b.machine == machine for b in self.bridges)
        return (f"{machine}: {len(fitted)} groups, {count} bridges ({len(shapes)} shapes), factor min "
                f"{factors[0]:.3f}, median {log_median(factors):.3f}, max {factors[-1]:.3f}; {own} groups divided "
                f"by their shape's own factor, {len(fitted) - own} by the median")


def reference_machine(fitted: Sequence[Observation]) -> str:
    """The machine of most of the trained groups of ``fitted`` that name theirs (ties: the first name in
    order); :data:`UNKNOWN_MACHINE` where none does."""
    counts = Counter(o.machine for o in fitted if o.mode == "train" and o.machine != UNKNOWN_MACHINE)
    if not counts:
        return UNKNOWN_MACHINE
    return min(counts, key=lambda m: (-counts[m], m))


def _usable(o: Observation) -> bool:
    return o.mode == "train" and o.cpu_time_s is not None and o.machine != UNKNOWN_MACHINE


_Rates = Tuple[List[float], Dict[int, List[float]]]   # setup-free rates, and rates by epochs run


def _rates(obs: Sequence[Observation]) -> Dict[Tuple[str, int, str], _Rates]:
    """Per configuration (:func:`same_but_epochs`), the CPU-s per replica-epoch of its setup-free
    differences (:func:`without_setup`) and of its groups as run, by their epochs."""
    out: Dict[Tuple[str, int, str], _Rates] = {}
    for o in without_setup(obs):
        if o.setup_free:
            out.setdefault(same_but_epochs(o), ([], {}))[0].append(per_replica_epoch(o, o.cpu_time_s))
    for o in obs:
        out.setdefault(same_but_epochs(o), ([], {}))[1].setdefault(o.epochs, []).append(
            per_replica_epoch(o, o.cpu_time_s))
    return out


def _ratio(mine: _Rates, ref: _Rates) -> Optional[Tuple[float, str]]:
    """One configuration's ``(factor, basis)``: the setup-free rates where both sides have them, else the
    groups of the longest epochs both ran; ``None`` where neither."""
    if mine[0] and ref[0]:
        return statistics.median(mine[0]) / statistics.median(ref[0]), "pairs"
    common = set(mine[1]) & set(ref[1])
    if not common:
        return None
    epochs = max(common)
    return statistics.median(mine[1][epochs]) / statistics.median(ref[1][epochs]), f"{epochs} epochs"


def _bridge(machine: str, shape: str, commit: str, mine: Sequence[Observation],
            ref: Sequence[Observation]) -> Optional[Bridge]:
    """The bridge of one shape and commit: the geometric mean over the configurations both machines ran."""
    mine_rates, ref_rates = _rates(mine), _rates(ref)
    ratios = [r for k in sorted(set(mine_rates) & set(ref_rates)) if (r := _ratio(mine_rates[k], ref_rates[k]))]
    if not ratios:
        return None
    factor = math.exp(sum(math.log(f) for f, _ in ratios) / len(ratios))
    return Bridge(machine, shape, commit, factor, ", ".join(sorted({b for _, b in ratios})))


def _by_shape(obs: Iterable[Observation]) -> Dict[Tuple[str, str, str], List[Observation]]:
    out: Dict[Tuple[str, str, str], List[Observation]] = {}
    for o in obs:
        out.setdefault((o.machine, shape_key(o.config, o.suite), o.commit), []).append(o)
    return out


def find_bridges(fitted: Sequence[Observation], folders: Mapping[str, Sequence[Observation]]) -> MachineFactors:
    """The reference machine of ``fitted`` and the bridges of the bridge ``folders`` (name -> its
    observations).  A bridge: the groups (finished, trained, with a CPU time) of one shape run by one
    commit on a machine other than the reference in a bridge folder, and those of the same shape, commit
    and configuration on the reference machine (in a bridge folder, or fitted); its factor is the
    machine's CPU-s per replica-epoch over the reference's, from the setup-free differences of two
    lengths where both sides have them, else from the groups of equal epochs.  Raises ``ValueError``
    (one line naming the folder) for a bridge folder that bridges nothing."""
    reference = reference_machine(fitted)
    if folders and reference == UNKNOWN_MACHINE:
        raise ValueError("--bridge: no fitted record names its machine (float_order.cpu): there is no reference "
                         "machine to bridge to")
    bridged = [o for obs in folders.values() for o in obs if _usable(o)]
    refs = _by_shape(o for o in [*fitted, *bridged] if _usable(o) and o.machine == reference)
    bridges = []
    for (machine, shape, commit), mine in sorted(_by_shape(o for o in bridged if o.machine != reference).items()):
        b = _bridge(machine, shape, commit, mine, refs.get((reference, shape, commit), []))
        if b is not None:
            bridges.append(b)
    factors = MachineFactors(reference, tuple(bridges))
    for folder, obs in folders.items():
        _check(folder, [o for o in obs if _usable(o)], factors)
    return factors


def _check(folder: str, obs: Sequence[Observation], factors: MachineFactors) -> None:
    """A bridge folder must bridge something: else a one-line error that names it, what it holds and the fix."""
    done = {(b.machine, b.shape, b.commit) for b in factors.bridges}
    done_ref = {(s, c) for _, s, c in done}
    keys = sorted(_by_shape(obs))
    if any((m, s, c) in done if m != factors.reference else (s, c) in done_ref for m, s, c in keys):
        return
    if not keys:
        raise ValueError(f"--bridge {folder}: no finished trained group with a CPU time (group_cpu_time_s) "
                         "on a machine its records name (float_order.cpu)")
    held = ", ".join(f"{s} at {c[:7] or '?'}" for _, s, c in keys[:3]) + (", ..." if len(keys) > 3 else "")
    if keys[0][0] == factors.reference:
        raise ValueError(f"--bridge {folder}: its groups ({held}) ran on the reference machine ({factors.reference}) "
                         "and no other --bridge folder ran their shape, commit, configuration and epochs (or two "
                         "lengths) on another machine: give that folder as a --bridge too, or fit this one as a "
                         "records folder")
    raise ValueError(f"--bridge {folder}: no group of the reference machine ({factors.reference}) has the shape, "
                     f"commit, configuration and epochs (or two lengths) of its groups ({held}, {keys[0][0]}): give "
                     "the reference machine's folder of that shape run by that commit as a --bridge too (or a "
                     "records folder), or fit this one as a records folder (at face value)")
