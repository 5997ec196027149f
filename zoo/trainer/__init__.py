"""``zoo.fit``: the benchmark runner's training protocol from Python (:mod:`zoo.trainer.fit`),
returning a :class:`~zoo.trainer.history.History`."""
from zoo.trainer.fit import fit
from zoo.trainer.history import History
from zoo.trainer.loggers import CSVLogger

__all__ = ["fit", "History", "CSVLogger"]
