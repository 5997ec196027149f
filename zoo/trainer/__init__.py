"""The training layer under ``zoo.fit`` (:mod:`zoo.fitting`) and ``zoo bench`` (:mod:`zoo.bench.run`).

R replicas of one architecture trained together under one :class:`~zoo.trainer.config.TrainConfig`:
:mod:`~zoo.trainer.config` (the torch-free schema), :mod:`~zoo.trainer.replicas` (stacking),
:mod:`~zoo.trainer.views` (a task's inputs, loss and metric), :mod:`~zoo.trainer.loop`
(:func:`~zoo.trainer.loop.train_replicas`), :mod:`~zoo.trainer.epoch`, :mod:`~zoo.trainer.state`,
:mod:`~zoo.trainer.stopping`, :mod:`~zoo.trainer.optim`, :mod:`~zoo.trainer.graphs` (CUDA graphs of the
epoch), :mod:`~zoo.trainer.resume`,
:mod:`~zoo.trainer.results`, :mod:`~zoo.trainer.history`; for ``zoo.fit``'s users
:mod:`~zoo.trainer.tasks` (what a fit trains on, as suite keys), :mod:`~zoo.trainer.progress`,
:mod:`~zoo.trainer.loggers` (``CSVLogger``, ``TensorBoardLogger``, ``MLflowLogger``) and :mod:`~zoo.trainer.frames` (``History`` as a
DataFrame / plot).  Nothing here imports ``zoo.bench``, and
importing this package imports nothing (``zoo.trainer.config`` stays torch-free).
"""
