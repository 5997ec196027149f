"""The shared schedule of the callbacks that read one graph's layer outputs every ``every`` epochs
(:class:`~zoo.diagnostics.EnergyRecorder`, :class:`~zoo.diagnostics.RankRecorder`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


class GraphRecorder:
    """Validates ``every``, keeps ``history`` and hands each due epoch's ``(graph, x)`` to the subclass."""

    #: what the subclass does with the graph, for the error on a task without one
    reads = "read the layer outputs of"

    def __init__(self, every: int = 10) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be an integer >= 1, got {every!r}")
        self.every = every
        self.history: List[Dict[str, Any]] = []

    def due(self, state: Any) -> Optional[Tuple[Any, Any]]:
        """``(graph, x)`` of the task when ``state.epoch`` is due, else ``None``."""
        if state.epoch % self.every:
            return None
        if state.inputs is None:
            raise ValueError(f"{type(self).__name__} needs a transductive task (one graph) to {self.reads}")
        return state.inputs[0], state.inputs[1]  # (edge_index, x[, False, edge_attr])
