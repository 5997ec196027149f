"""``zoo bench --save-weights``: each replica's selected (``best``) or final (``last``) state as
model file bytes (:func:`zoo.model_file.state_bytes`), made where the group ran; the driver
writes them beside the records (:mod:`zoo.bench.store.weights`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from torch import Tensor

from zoo.model_file import describe, state_bytes

__all__ = ["weights_payload"]


def _full_state(replicas: Any, r: int, params: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Replica ``r``'s whole ``state_dict``: its parameters and its own buffers."""
    state = {}
    for key, value in replicas.base.state_dict().items():
        if key in params:
            state[key] = params[key]
        elif key in replicas.buffers:
            state[key] = replicas.buffers[key][r]
        else:
            state[key] = value
    return state


def weights_payload(which: str, replicas: Any, cells: Sequence[Any], results: Sequence[Any]) -> List[Optional[bytes]]:
    """One model file (bytes) per replica, ``None`` where there is no such state (``best`` of a run
    that diverged before any evaluation)."""
    if which == "none":
        return [None] * len(cells)
    header = describe(replicas.base)
    out: List[Optional[bytes]] = []
    for r, (cell, res) in enumerate(zip(cells, results)):
        params = res.best_state if which == "best" else replicas.state_of(r)
        if params is None:
            out.append(None)
            continue
        m = cell.config["model"]
        build = {**header["build"], "init": m["init"], "init_kwargs": dict(m["init_kwargs"] or {})}
        state = _full_state(replicas, r, params)
        floats = {str(v.dtype).replace("torch.", "") for v in state.values() if v.is_floating_point()}
        extra = {"cell": cell.id, "seed": cell.seed, "which": which,
                 "epoch": res.best_epoch if which == "best" else res.epochs_run,
                 "metrics": res.metrics, "config": cell.config}
        out.append(state_bytes(state, {"build": build, "head": header["head"], "extra": extra,
                                       "dtype": floats.pop() if len(floats) == 1 else None}))
    return out
