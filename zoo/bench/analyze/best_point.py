"""Model selection over a suite's ``[search]`` (:mod:`zoo.bench.suite.search_space`): the best point per cell.

A leaderboard cell of a searched suite holds the runs of several search points (e.g. lr x
dropout).  As the papers do ("we keep the configuration with the best average accuracy",
LipschitzNorm §10.3), the cell shows the runs of one point: the one with the best mean of the
search's selection ``metric`` over seeds.  Where the recorded points have different seeds (a
point run at 3 seeds beside one run at 5), the means are taken over the seeds that every
recorded point has, so no point wins by having luckier extra seeds; without a seed in common,
over each point's own runs.  Ties go to the point listed first in the suite.  The cell then
shows that point's mean and spread over all of its runs, and says which point won and how many
of the cell's points have records: a search with points not run is *partial*, and says so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo.bench.suite.cells import cell_value, comparable
from zoo.bench.suite.search_space import describe_point, searched_keys


@dataclass(frozen=True)
class Choice:
    """The search point a leaderboard cell shows, and how it was chosen."""

    point: Dict[str, Any]       # the winner's values of the search axes
    metric: str                 # the selection metric
    score: Optional[float]      # the winner's mean selection metric (a fraction; None: nothing to compare)
    points: int                 # the cell's search points in the suite (N)
    recorded: int               # of them, points with at least one record
    seeds: Tuple[Any, ...] = ()  # the seeds the means were compared on (empty: each point's own runs)
    #: every recorded point's score, in suite order: ``[(point, score, runs)]``
    scores: List[Tuple[Dict[str, Any], Optional[float], int]] = field(default_factory=list, compare=False)

    @property
    def partial(self) -> bool:
        """Whether some of the cell's search points have no record (not the paper's protocol)."""
        return self.recorded < self.points

    def describe(self) -> str:
        """``best of 8: lr=0.01, dropout=0.5`` or ``best of 3 recorded of 8 points (partial search): ...``."""
        head = f"best of {self.points}" if not self.partial else \
            f"best of {self.recorded} recorded of {self.points} points (partial search)"
        return f"{head}: {describe_point(self.point)}"


def search_axes(info: Mapping[str, Any]) -> List[str]:
    """The search axes of a resolved suite (``suite.resolved.json``); empty without ``[search]``."""
    return list(searched_keys(info.get("search")))


def selection_metric(info: Mapping[str, Any]) -> Optional[str]:
    return (info.get("search") or {}).get("metric")


def point_of(config: Dict[str, Any], axes: Sequence[str]) -> Dict[str, Any]:
    """A cell's values of the search axes (a model default where the cell does not set the key)."""
    return {k: cell_value(config, k) for k in axes}


def point_key(config: Dict[str, Any], axes: Sequence[str]) -> str:
    """A hashable key of a cell's search point (0 == 0.0, names normalised)."""
    return json.dumps([repr(comparable(cell_value(config, k))) for k in axes])


def _mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def choose(runs: Mapping[str, Sequence[Mapping[str, Any]]], order: Sequence[str], metric: str,
           axes: Sequence[str]) -> Tuple[str, Choice]:
    """``(winning point key, Choice)`` for one leaderboard cell.

    ``runs``: point key -> that point's records (each with ``config`` and ``metrics``); ``order``:
    the cell's point keys in suite order (all N, recorded or not).  The winner has the best mean
    of ``metrics[metric]`` over the seeds every recorded point has (module docstring)."""
    per_seed: Dict[str, Dict[Any, List[float]]] = {}
    for key in order:
        for rec in runs.get(key, ()):
            value = (rec.get("metrics") or {}).get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
                per_seed.setdefault(key, {}).setdefault(rec["config"]["run"].get("seed"), []).append(float(value))
    scored = [k for k in order if k in per_seed]
    common = set.intersection(*(set(per_seed[k]) for k in scored)) if scored else set()
    seeds = tuple(sorted(common, key=lambda s: (str(type(s)), s)))

    def score(key: str) -> Optional[float]:
        if key not in per_seed:
            return None
        by_seed = per_seed[key]
        use = seeds or tuple(by_seed)
        return _mean([_mean(by_seed[s]) for s in use])  # type: ignore[misc]

    scores = {k: score(k) for k in order}
    recorded = [k for k in order if runs.get(k)]
    ranked = sorted(scored, key=lambda k: -scores[k])  # type: ignore[operator]  # stable: ties keep suite order
    winner = ranked[0] if ranked else (recorded[0] if recorded else order[0])
    first = (runs.get(winner) or [{}])[0]
    point = point_of(first["config"], axes) if "config" in first else {}
    return winner, Choice(point=point, metric=metric, score=scores.get(winner), points=len(order),
                          recorded=len(recorded), seeds=seeds,
                          scores=[(point_of(runs[k][0]["config"], axes), scores[k], len(runs[k])) for k in recorded])
