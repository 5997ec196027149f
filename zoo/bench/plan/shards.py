"""Splitting a selection into ``--shard I/N`` job-array shards, balanced by the cost model.

Shards select *cells of the full suite* (after ``--where``): run ids stay the full suite's, so
a shard and a later full run into the same folder share their records (the full run skips what
is done).  Shards split the suite's groups (never a group) into N deterministic, cost-balanced
parts: the same suite and ``--where`` give the same partition on every machine.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.plan.cost import CostModelError, shipped_table
from zoo.bench.plan.cost_file import shipped_model
from zoo.bench.suite.schema import Cell, Suite
from zoo.bench.suite.selection import SelectionError, select_where


# --------------------------------------------------------------------------- --shard


def parse_shard(text: str) -> Tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)`` (1-based, like Slurm's ``$SLURM_ARRAY_TASK_ID`` with ``--array=1-N``)."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise SelectionError(f"--shard takes I/N (e.g. 2/3, shards numbered 1..N), got {text!r}") from None
    if n < 1 or not 1 <= i <= n:
        raise SelectionError(f"--shard {text}: need 1 <= I <= N (shards are numbered 1..N)")
    return i, n


def estimated_group_seconds(configs: Sequence[Mapping[str, Any]], mode: str = "train",
                            suite: Optional[str] = None, device: str = "cpu") -> float:
    """A group's estimated wall time at its epoch cap, by the shipped model (shards, job order)."""
    epochs = int((configs[0].get("train") or {}).get("epochs") or 0)
    return shipped_model(device).group_seconds(configs, epochs, shipped_table(), mode, suite)


def group_cost(cells: Sequence[Cell]) -> float:
    """Estimated wall time of a group (seconds, at its epoch cap) by the calibrated cost model
    (:mod:`zoo.bench.plan.cost`): what ``--shard`` balances and ``--workers`` orders by.  A model whose
    card states no cost (a family of the user's own, in ``zoo.fit``) costs 0 here: only the order of
    the jobs depends on it, never a number shown."""
    try:
        return estimated_group_seconds([c.config for c in cells])
    except CostModelError:
        return 0.0


def shard_groups(groups: Mapping[str, Sequence[Cell]], index: int, count: int) -> List[str]:
    """Group ids of shard ``index`` (1-based) of ``count``: greedy longest-processing-time first.

    Groups are taken by decreasing cost (ties by id) and each goes to the least-loaded shard
    (ties to the lowest number) — deterministic, and within 4/3 of the best balance.
    """
    loads = [0.0] * count
    owner: Dict[str, int] = {}
    for gid in sorted(groups, key=lambda g: (-group_cost(groups[g]), g)):
        k = min(range(count), key=lambda s: (loads[s], s))
        owner[gid] = k
        loads[k] += group_cost(groups[gid])
    return [g for g in groups if owner[g] == index - 1]


def select(suite: Suite, where: Optional[Mapping[str, Sequence[Any]]] = None,
           shard: Optional[Tuple[int, int]] = None) -> List[Cell]:
    """Cells of ``suite`` chosen by ``--where`` and then ``--shard`` (suite order kept)."""
    cells = select_where(suite, where or {})
    if shard is None:
        return cells
    groups: Dict[str, List[Cell]] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    keep = set(shard_groups(groups, *shard))
    return [c for c in cells if c.group in keep]


def selection_info(where: Optional[Mapping[str, Sequence[Any]]], shard: Optional[Tuple[int, int]]
                   ) -> Optional[Dict[str, Any]]:
    """What ``suite.resolved.json`` stores under ``selection`` (None for a full run)."""
    if not where and shard is None:
        return None
    return {"where": {k: list(v) for k, v in (where or {}).items()},
            "shard": None if shard is None else [shard[0], shard[1]]}
