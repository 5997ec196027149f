"""Mid-run resume state: a long group saves the training loop's state and a re-run resumes it.

Records are written per finished group, so a group killed after hours of training (nonlocal
L = 256: 6-7 h on the CPU) used to be lost whole.  Now a group that has trained longer than
``every`` (wall seconds, default 10 minutes; or every N epochs) since its start or its last
save writes its state to the :class:`ResumeFile`'s path — atomically (temporary file, fsync,
rename), so a kill during the save leaves the previous one intact — and a re-run of the same
group (same cells, dtype, stacking) resumes from it.  ``zoo bench`` names the file after the
group's cells (``OUT/checkpoints/<key>.pt``, :mod:`zoo.bench.run.resume_file`) and removes it once
the group's records are written.

The state (:func:`snapshot`) is everything the epoch loop of :func:`zoo.trainer.loop.train_replicas`
carries from one epoch to the next: the replicas' stacked parameters (in the layout the optimiser
uses), buffers and dropout streams (:meth:`~zoo.trainer.replicas.Replicas.state_dict`), the
optimiser's and the learning-rate scheduler's state tensors, the mini-batch shuffling generator,
torch's global generator, the epoch, and the per-replica selection and stopping state with the
best parameters when kept (:meth:`~zoo.trainer.state.LoopState.state_dict`).  Restored
(:func:`restore`), the loop continues exactly as if it had not stopped: the resumed numbers are
bitwise those of an uninterrupted run (tested at float64).

With the Ray executor the output folder must be on a file system the workers share (as it
must be for ``--data-root``); a worker that cannot write there trains without resume state.
"""
from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

DEFAULT_EVERY_S = 600.0
FORMAT = 1


@dataclass(frozen=True)
class ResumePolicy:
    """How often a group saves: every ``seconds`` of wall time or every ``epochs`` epochs
    (one of them; ``None`` for both means never)."""

    seconds: Optional[float] = DEFAULT_EVERY_S
    epochs: Optional[int] = None

    @property
    def enabled(self) -> bool:
        return self.seconds is not None or self.epochs is not None


def parse_every(text: Union[str, float, int, None]) -> ResumePolicy:
    """``--resume-every``: ``600``/``600s``/``10m``/``2h`` (wall time), ``50ep`` (epochs),
    ``off`` or ``0`` (never)."""
    if text is None:
        return ResumePolicy()
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return ResumePolicy(float(text)) if text > 0 else ResumePolicy(None)
    raw = str(text).strip().lower()
    if raw in ("off", "no", "never", "0"):
        return ResumePolicy(None)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h|ep|epochs?)?", raw)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"--resume-every takes a wall time (600, 600s, 10m, 2h), a number of epochs "
                         f"(50ep) or 'off'; got {text!r}")
    value, unit = float(m.group(1)), m.group(2) or "s"
    if unit.startswith("ep"):
        if not value.is_integer():
            raise ValueError(f"--resume-every {text}: a whole number of epochs (e.g. 50ep)")
        return ResumePolicy(None, int(value))
    return ResumePolicy(value * {"s": 1, "m": 60, "h": 3600}[unit])


@dataclass
class ResumeFile:
    """Saves and loads one group's resume state file at ``path`` (see the module docstring)."""

    path: Path
    policy: ResumePolicy = field(default_factory=ResumePolicy)
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    saves: int = 0
    _last: float = field(default_factory=time.perf_counter)
    _last_epoch: int = 0

    def due(self, epoch: int) -> bool:
        """Whether the state after training epoch ``epoch`` should be saved now."""
        p = self.policy
        if p.epochs is not None:
            return epoch + 1 - self._last_epoch >= p.epochs
        return p.seconds is not None and time.perf_counter() - self._last >= p.seconds

    def save(self, state: Dict[str, Any]) -> None:
        """Write ``state`` (with the fingerprint) atomically; an unwritable folder only warns."""
        payload = {"format": FORMAT, "fingerprint": dict(self.fingerprint), "state": state}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    torch.save(payload, fh)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            warnings.warn(f"resume state not written ({self.path}): {e}; the group goes on without it")
            return
        self.saves += 1
        self._last = time.perf_counter()
        self._last_epoch = int(state["next_epoch"])

    def load(self) -> Optional[Dict[str, Any]]:
        """The saved state, or ``None`` when there is none or it is another group's / format's
        (then it is ignored with a warning and the group starts afresh)."""
        if not self.path.exists():
            return None
        try:
            payload = torch.load(self.path, map_location="cpu", weights_only=False)
        except Exception as e:  # a truncated file cannot happen (atomic), but a foreign one can
            warnings.warn(f"resume state {self.path} unreadable ({type(e).__name__}: {e}); starting the group afresh")
            return None
        if payload.get("format") != FORMAT or payload.get("fingerprint") != dict(self.fingerprint):
            warnings.warn(f"resume state {self.path} belongs to another configuration; starting the group afresh")
            return None
        self._last_epoch = int(payload["state"]["next_epoch"])
        return payload["state"]

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()


# --------------------------------------------------------------------------- state of objects


def tensor_state(obj: Any) -> Dict[str, Any]:
    """The tensor attributes (and lists of tensors) of an optimiser / scheduler, detached copies."""
    out: Dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, Tensor):
            out[name] = value.detach().clone()
        elif isinstance(value, list) and value and all(isinstance(v, Tensor) for v in value):
            out[name] = [v.detach().clone() for v in value]
    return out


def load_tensor_state(obj: Any, state: Mapping[str, Any]) -> None:
    """Copy ``state`` into ``obj``'s tensors *in place* (tensors shared between objects — the
    scheduler's learning rates that the optimiser reads — stay shared)."""
    for name, value in state.items():
        have = getattr(obj, name)
        if isinstance(value, list):
            for h, v in zip(have, value):
                h.copy_(v)
        elif have is None:
            setattr(obj, name, value.to(device=_device_of(obj)))
        else:
            have.copy_(value)


def _device_of(obj: Any) -> Optional[torch.device]:
    for value in vars(obj).values():
        if isinstance(value, Tensor):
            return value.device
    return None


def generator_states(rng: Any) -> Dict[Any, Tensor]:
    return {key: state.clone() for key, state in rng.get_state().items()}


def load_generator_states(rng: Any, states: Mapping[Any, Tensor]) -> None:
    """Re-create every saved replica stream (they are made lazily) and rewind it."""
    for (replica, device) in states:
        rng.generator(replica, torch.device(device))
    rng.set_state(dict(states))


def to_device(tree: Any, device: torch.device) -> Any:
    """Tensors of a loaded state back on the group's device (strides kept)."""
    if isinstance(tree, Tensor):
        return tree.to(device)
    if isinstance(tree, dict):
        return {k: to_device(v, device) for k, v in tree.items()}
    if isinstance(tree, list):
        return [to_device(v, device) for v in tree]
    return tree


def restore_params(params: List[Tensor], saved: Sequence[Tensor]) -> List[Tensor]:
    """New leaf parameters with the saved values *and strides* (the optimiser's layout)."""
    out = []
    for p, s in zip(params, saved):
        new = torch.empty_strided(s.shape, s.stride(), dtype=p.dtype, device=p.device)
        out.append(new.copy_(s).requires_grad_(True))
    return out


# --------------------------------------------------------------------------- the loop's state


def snapshot(next_epoch: int, elapsed_s: float, replicas: Any, optimizer: Any, scheduler: Any, view: Any,
             loop: Any, callbacks: Sequence[Any] = (), cpu_s: Optional[float] = None) -> Dict[str, Any]:
    """The loop's state after training epoch ``next_epoch - 1`` (what :meth:`ResumeFile.save` writes);
    ``cpu_s``: the process CPU time the loop has used over every sitting so far (left out when unknown:
    :func:`saved_cpu_s`)."""
    generator = getattr(view, "generator", None)
    return {"next_epoch": next_epoch, "elapsed_s": elapsed_s, **({"cpu_s": cpu_s} if cpu_s is not None else {}),
            **replicas.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": tensor_state(scheduler) if scheduler is not None else None,
            "batch_rng": generator.get_state() if generator is not None else None,
            "torch_rng": torch.get_rng_state(), **loop.state_dict(),
            "callbacks": {key: cb.state_dict() for key, cb in stateful_callbacks(callbacks).items()}}


def saved_cpu_s(saved: Optional[Mapping[str, Any]]) -> Optional[float]:
    """The process CPU time the earlier sittings of a resumed loop used: 0 for a fresh start (``saved``
    None), ``None`` for a state saved without it (their CPU time is unknown, not zero)."""
    if saved is None:
        return 0.0
    return float(saved["cpu_s"]) if saved.get("cpu_s") is not None else None


def stateful_callbacks(callbacks: Sequence[Any]) -> Dict[str, Any]:
    """The callbacks that keep a state (``state_dict`` and ``load_state_dict``), by class name
    (``Name#1`` for a second one of a class): the key survives callbacks without state coming or
    going (a progress bar in one sitting and not the next)."""
    out: Dict[str, Any] = {}
    for cb in callbacks:
        if callable(getattr(cb, "state_dict", None)) and callable(getattr(cb, "load_state_dict", None)):
            name = type(cb).__qualname__
            key, n = name, 0
            while key in out:
                n += 1
                key = f"{name}#{n}"
            out[key] = cb
    return out


def restore(saved: Dict[str, Any], replicas: Any, optimizer: Any, scheduler: Any, view: Any,
            loop: Any, callbacks: Sequence[Any] = ()) -> Tuple[int, float]:
    """Load a :func:`snapshot` into the loop's objects (and the callbacks' states); returns
    ``(next_epoch, elapsed_s)``."""
    saved = to_device(saved, replicas.params[0].device)
    replicas.load_state_dict(saved)
    optimizer.load_state_dict(saved["optimizer"])  # made for the restored parameters' layout
    if scheduler is not None:
        load_tensor_state(scheduler, saved["scheduler"])
    if getattr(view, "generator", None) is not None:
        view.generator.set_state(saved["batch_rng"].cpu())
    torch.set_rng_state(saved["torch_rng"].cpu())
    loop.load_state_dict(saved)
    states = saved.get("callbacks") or {}
    for key, cb in stateful_callbacks(callbacks).items():
        if key in states:
            cb.load_state_dict(states[key])
    return int(saved["next_epoch"]), float(saved["elapsed_s"])
