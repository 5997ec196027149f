"""What the paper cells without records would cost, and the commands that would fill them.

A paper cell (an entry of a suite's ``reported`` numbers) is filled by the suite cells whose keys
match the entry's (as the leaderboard matches them).  Its cost is its pending cells' share of
their groups' estimated time (:mod:`zoo.bench.plan.cost`, CPU time on the CPU: a group of R seed replicas costs
more than one replica, less than R); its class is *runs here* when that fits
:data:`~zoo.bench.plan.estimate.RUNS_HERE_CPU_HOURS` on the records' 2-core CPU, else *needs a GPU*,
and then its GPU time is the same share of the ``cuda`` cost model's estimate (:func:`gpu_hours`); a cell
whose dataset's raw files are not in the records' machine's data mirror (:func:`absent_datasets`) is *data
absent here* instead, whatever its cost, with the reason: no command of it runs there until the files are
provided.  A paper cell that no pending suite cell fills (the suite has no cell of its keys) is *no cell of
the suite*, a class of its own: its zero cost is not a price (nothing would run it), so never *runs here*.
The missing cells of a suite are gathered by slice (dataset x depth) into ``zoo bench`` commands, each
narrowed to the paper cells' keys so that it runs what it says it costs; a slice too large to run
here is split further where its paper cells run here on their own.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.analyze.board import KEY_META
from zoo.bench.suite.cells import comparable
from zoo.bench.plan.cost import CostModel
from zoo.bench.plan.estimate import RUNS_HERE_CPU_HOURS, format_value

RUNS_HERE = "runs here"
NEEDS_GPU = "needs a GPU"
DATA_ABSENT = "data absent here"
NO_CELL = "no cell of the suite"   # a paper cell no pending suite cell fills: nothing to run, not "runs here"
SLICE_KEYS = ("dataset", "num_layers")


@dataclass
class MissingCell:
    """One paper cell without records: its entry, the pending cells that fill it and their cost."""

    entry: Mapping[str, Any]
    cells: List[Mapping[str, Any]]          # resolved cells ({"id", "group", "config"}) not yet run
    cell_seconds: Dict[str, float]          # each cell's share of its group's estimate
    cell_gpu_seconds: Dict[str, float] = field(default_factory=dict)  # the same by the cuda model
    absent: str = ""                        # why its data cannot be loaded here ("": it can)

    @property
    def seconds(self) -> float:
        return sum(self.cell_seconds.values())

    @property
    def gpu_seconds(self) -> Optional[float]:
        """Estimated GPU time (the ``cuda`` cost model), None where it was not estimated."""
        return sum(self.cell_gpu_seconds.values()) if self.cell_gpu_seconds else None

    @property
    def cls(self) -> str:
        """Its class: :data:`NO_CELL` without cells (its zero cost is not a price), else
        :data:`DATA_ABSENT` where its data is absent here, else by its cost."""
        if not self.cells:
            return NO_CELL
        return DATA_ABSENT if self.absent else _by_cost(self.seconds)


def _by_cost(seconds: float) -> str:
    return RUNS_HERE if seconds <= RUNS_HERE_CPU_HOURS * 3600 else NEEDS_GPU


@dataclass
class FillCommand:
    """A ``zoo bench`` command filling a slice's missing cells, with its cost."""

    suite: str
    where: Tuple[Tuple[str, Tuple[Any, ...]], ...]
    runs: int
    seconds: float
    cells: int = 0
    extra: List[str] = field(default_factory=list)
    #: the same runs' estimated time on one GPU (the ``cuda`` cost model); None where not estimated
    gpu_seconds: Optional[float] = None
    absent: str = ""   # why its data cannot be loaded here ("": it can)

    @property
    def cls(self) -> str:
        return DATA_ABSENT if self.absent else _by_cost(self.seconds)

    def command(self) -> str:
        clauses = "".join(f" --where {k}={','.join(format_value(v) for v in vs)}" for k, vs in self.where)
        # by its cost, also where its data is absent here (the command to run once the files are provided)
        device = "" if _by_cost(self.seconds) == RUNS_HERE else " --device cuda"  # or --executor ray / --shard I/N
        return f"zoo bench {self.suite}{clauses}{''.join(' ' + e for e in self.extra)}{device}"


def entry_matches(entry: Mapping[str, Any], config: Mapping[str, Any],
                  value_of: Callable[[Mapping[str, Any], str], Any], norm: Callable[[Any], Any],
                  ignore: Sequence[str] = ()) -> bool:
    """Whether a cell of ``config`` counts toward paper ``entry`` (its keys but ``ignore``: a
    ``pruned`` board's ``layer`` is a column of every cell, not a cell key)."""
    return all(norm(value_of(config, k)) == norm(v) for k, v in entry.items()
               if k not in KEY_META and k not in ignore)


def absent_datasets(cells: Sequence[Mapping[str, Any]], table: Mapping[str, Mapping[str, Any]]) -> Dict[str, str]:
    """``{dataset: why}`` for the datasets of ``cells`` whose raw files were not in the data mirror of the
    records' machine when the size table was made (its ``mirrored``: ``benchmarks/dataset_sizes.py``).

    Read from the committed table, not this machine's files, so the page is the same wherever it is
    made (as its costs are: the cost model of the records' machine)."""
    out: Dict[str, str] = {}
    for name in sorted({c["config"]["task"]["dataset"] for c in cells}):
        entry = table.get(name) or {}
        if entry.get("mirrored") is False:
            out[name] = f"{name}: {', '.join(entry.get('raw_files') or ())} not in the records' machine's data mirror"
    return out


def _absent_of(cells: Sequence[Mapping[str, Any]], absent: Mapping[str, str]) -> str:
    """The reasons (``absent``: :func:`absent_datasets`) that apply to ``cells``, or ``""``."""
    return "; ".join(dict.fromkeys(absent[d] for d in (c["config"]["task"]["dataset"] for c in cells) if d in absent))


def pending_seconds(suite: str, mode: str, cells: Sequence[Mapping[str, Any]], done: Sequence[str], model: CostModel,
                    table: Mapping[str, Mapping[str, Any]],
                    epochs_of: Optional[Callable[[Mapping[str, Any]], float]] = None) -> Dict[str, float]:
    """Each resolved cell not in ``done`` (ids) -> its share of its group's estimated seconds (a group's
    estimate is shared by its pending cells) at the epochs ``epochs_of(config)`` expects
    (:func:`zoo.bench.plan.estimate.expected_epochs_of`; default: the suite's cap)."""
    done_ids = set(done)
    groups: Dict[str, List[Mapping[str, Any]]] = {}
    for c in cells:
        if c["id"] not in done_ids:
            groups.setdefault(c["group"], []).append(c)
    per_cell: Dict[str, float] = {}
    for gcells in groups.values():
        cfg = gcells[0]["config"]
        epochs = epochs_of(cfg) if epochs_of else int((cfg.get("train") or {}).get("epochs") or 0)
        seconds = model.group_seconds([c["config"] for c in gcells], epochs, table, mode, suite)
        for c in gcells:
            per_cell[c["id"]] = seconds / len(gcells)
    return per_cell


def missing_cells(suite: str, mode: str, cells: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]],
                  done: Sequence[str], model: CostModel, table: Mapping[str, Mapping[str, Any]],
                  value_of: Callable[[Mapping[str, Any], str], Any],
                  norm: Callable[[Any], Any] = lambda v: v, ignore: Sequence[str] = (),
                  seconds: Optional[Mapping[str, float]] = None,
                  gpu_seconds: Optional[Mapping[str, float]] = None,
                  absent: Mapping[str, str] = {}) -> List[MissingCell]:
    """The cost of each paper ``entries`` item (entries without records) from the suite's resolved
    ``cells`` not in ``done`` (ids); ``seconds``: :func:`pending_seconds` of the same, if already known;
    ``gpu_seconds``: the same by the ``cuda`` cost model (kept per cell; ``None``: not estimated);
    ``absent``: :func:`absent_datasets` (their cells are *data absent here*)."""
    per_cell = pending_seconds(suite, mode, cells, done, model, table) if seconds is None else seconds
    pending = [c for c in cells if c["id"] in per_cell]
    indexes: Dict[Tuple[str, ...], Optional[Dict[Any, List[Mapping[str, Any]]]]] = {}
    out = []
    for e in entries:
        keys = tuple(k for k in e if k not in KEY_META and k not in ignore)
        if keys not in indexes:
            indexes[keys] = _index_by(pending, keys, value_of, norm)
        index = indexes[keys]
        if index is None:  # a value that cannot be hashed: compare cell by cell
            mine = [c for c in pending if entry_matches(e, c["config"], value_of, norm, ignore)]
        else:
            try:
                mine = index.get(tuple(norm(e[k]) for k in keys), [])
            except TypeError:
                mine = [c for c in pending if entry_matches(e, c["config"], value_of, norm, ignore)]
        gpu = {c["id"]: gpu_seconds[c["id"]] for c in mine} if gpu_seconds is not None else {}
        out.append(MissingCell(e, mine, {c["id"]: per_cell[c["id"]] for c in mine}, gpu, _absent_of(mine, absent)))
    return out


def _index_by(cells: Sequence[Mapping[str, Any]], keys: Tuple[str, ...],
              value_of: Callable[[Mapping[str, Any], str], Any],
              norm: Callable[[Any], Any]) -> Optional[Dict[Any, List[Mapping[str, Any]]]]:
    """``cells`` (in order) by their normalised values of ``keys``, or None if one cannot be hashed:
    the same cells as :func:`entry_matches` for every entry with those keys (a dict lookup is
    ``==`` for hashable values), once per key set instead of once per entry."""
    index: Dict[Any, List[Mapping[str, Any]]] = {}
    try:
        for c in cells:
            index.setdefault(tuple(norm(value_of(c["config"], k)) for k in keys), []).append(c)
    except TypeError:
        return None
    return index


def fill_commands(suite: str, missing: Sequence[MissingCell], value_of: Callable[[Mapping[str, Any], str], Any],
                  pending: Sequence[Mapping[str, Any]], seconds: Mapping[str, float],
                  by: Sequence[str] = SLICE_KEYS, extra: Sequence[str] = (),
                  ignore: Sequence[str] = (), gpu_seconds: Optional[Mapping[str, float]] = None,
                  narrow: Sequence[str] = (), inherited: Sequence[Tuple[str, Tuple[Any, ...]]] = (),
                  absent: Mapping[str, str] = {}) -> List[FillCommand]:
    """One command per slice (the values of ``by``) of the missing cells, cheapest first.

    A slice's command also names the paper cells' other keys (``--where variant=a,b``) wherever the
    slice holds pending cells of other values, so that it runs what it claims: its runs and seconds
    are those of every ``pending`` cell (``seconds``: :func:`pending_seconds`) its ``--where``
    selects, each counted once, paper cell or not (``--where`` clauses select a product; values are
    compared as ``--where`` compares them, :func:`~zoo.bench.suite.cells.comparable`).
    A slice too large to run here that holds paper cells which do run here on their own is split
    by the key on which its paper cells take the most values (e.g. ``variant``), until each command
    runs here or holds no such cell: every *runs here* paper cell then has a *runs here* command.
    ``gpu_seconds`` (the same by the ``cuda`` cost model) sets each command's ``gpu_seconds``;
    ``narrow``: keys every command names where its slice holds pending cells of other values, as the
    paper cells' own keys (a suite's readings key: the text's reading, not the alternatives beside it);
    ``inherited``: the ``--where`` clauses of the slice these are finer slices of (``pending`` is its
    cells), kept in each finer command so that it selects no more than its parent's cells.
    ``absent``: :func:`absent_datasets`; a command selecting their cells is *data absent here*.
    """
    out: List[FillCommand] = []
    for command, members, here in _slice_commands(suite, missing, value_of, pending, seconds, tuple(by), extra,
                                                  ignore, gpu_seconds, tuple(narrow), tuple(inherited)):
        command.absent = _absent_of(here, absent)
        cells = [missing[i] for i in members]
        finer = None if command.cls != NEEDS_GPU or not any(m.cls == RUNS_HERE for m in cells) \
            else _distinguishing_key(cells, tuple(by), ignore)
        if finer is None:
            out.append(command)
        else:  # the finer slices select among this slice's cells only
            out += fill_commands(suite, _within(cells, here), value_of, here, seconds, (*by, finer), extra, ignore,
                                 gpu_seconds, narrow, command.where, absent)
    return sorted(out, key=lambda f: (f.seconds, f.command()))


def _within(missing: Sequence[MissingCell], here: Sequence[Mapping[str, Any]]) -> List[MissingCell]:
    """The paper cells, each with only its cells inside a slice (``here``): a paper cell spanning
    several slices (e.g. one number over two depths) must not bring its cells of the other slices
    into this one's finer commands.  Each keeps its whole cost, so its class stays the paper cell's."""
    ids = {c["id"] for c in here}
    inside = [replace(m, cells=[c for c in m.cells if c["id"] in ids]) for m in missing]
    return [m for m in inside if m.cells]


def _distinguishing_key(missing: Sequence[MissingCell], by: Tuple[str, ...], ignore: Sequence[str]) -> Optional[str]:
    """The key outside ``by`` with the most distinct values among the paper cells (the first in their
    entries' order on a tie; ``variant`` before the ``optimizer`` it implies), or None if none differs."""
    keys: List[str] = []
    for m in missing:
        keys += [k for k in m.entry if k not in KEY_META and k not in ignore and k not in by and k not in keys]
    counts = {k: len({repr(comparable(m.entry.get(k))) for m in missing}) for k in keys}
    best = max(keys, key=lambda k: counts[k], default=None)  # max keeps the first of equals
    return best if best is not None and counts[best] > 1 else None


def _slice_commands(suite: str, missing: Sequence[MissingCell], value_of: Callable[[Mapping[str, Any], str], Any],
                    pending: Sequence[Mapping[str, Any]], seconds: Mapping[str, float], by: Tuple[str, ...],
                    extra: Sequence[str], ignore: Sequence[str],
                    gpu_seconds: Optional[Mapping[str, float]], narrow: Tuple[str, ...] = (),
                    inherited: Tuple[Tuple[str, Tuple[Any, ...]], ...] = ()
                    ) -> List[Tuple[FillCommand, List[int], List[Mapping[str, Any]]]]:
    """:func:`fill_commands`' slices by ``by``, each with the indexes of its paper cells in ``missing``
    and the pending cells its command selects."""
    slices: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    for i, m in enumerate(missing):
        for c in m.cells:
            key = tuple(value_of(c["config"], k) for k in by)
            s = slices.setdefault(key, {"cells": [], "entries": set(), "keys": [k for k in narrow if k not in by]})
            s["cells"].append(c)
            s["entries"].add(i)
            s["keys"] += [k for k in m.entry if k not in KEY_META and k not in ignore and k not in by
                          and k not in s["keys"]]
    out = []
    by_slice = _index_by(pending, by, value_of, comparable)  # one pass, not a scan per slice
    for key, s in slices.items():
        where = [(k, (v,)) for k, v in zip(by, key) if v is not None]
        exact = len(where) == len(by)
        where += [(k, vs) for k, vs in inherited if k not in by]  # pending already meets these
        if by_slice is not None and exact:
            here = by_slice.get(tuple(comparable(v) for v in key), [])
        else:
            here = [c for c in pending
                    if all(comparable(value_of(c["config"], k)) == comparable(vs[0]) for k, vs in where if k in by)]
        for k in s["keys"]:
            wanted = {repr(comparable(value_of(c["config"], k))): value_of(c["config"], k) for c in s["cells"]}
            narrowed = [c for c in here if repr(comparable(value_of(c["config"], k))) in wanted]
            clause = (k, tuple(wanted[r] for r in sorted(wanted)))
            if len(narrowed) < len(here):
                where = [(w, vs) for w, vs in where if w != k] + [clause]
                here = narrowed
            else:  # an inherited clause names only the values this finer slice has
                where = [clause if w == k and len(vs) > len(clause[1]) else (w, vs) for w, vs in where]
        gpu = sum(gpu_seconds[c["id"]] for c in here) if gpu_seconds is not None else None
        command = FillCommand(suite, tuple(where), len(here), sum(seconds[c["id"]] for c in here),
                              len(s["entries"]), list(extra), gpu)
        out.append((command, sorted(s["entries"]), here))
    return out


def gpu_hours(command: FillCommand) -> float:
    """GPU-hours of ``command`` on one GPU by the shipped ``cuda`` cost model (fitted on H200 records:
    ``zoo/bench/plan/cost_model.json``), for ordering a GPU queue cheapest first."""
    if command.gpu_seconds is None:
        raise ValueError(f"{command.command()}: no GPU estimate; build the commands with "
                         "fill_commands(..., gpu_seconds=pending_seconds(..., shipped_model('cuda'), ...))")
    return command.gpu_seconds / 3600.0
