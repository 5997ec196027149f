"""The cost model's file, ``cost_model.json`` (shipped beside this module): one fitted model per device
kind, read by :func:`load_cost_model` and written by ``zoo bench calibrate`` (:func:`write_model`).  An
entry may say why it is not yet a price (``provisional``: the ``cuda`` entry, fitted before the training
loop was rebuilt); its ``fitted_on`` and the reproduction page say so, and a refit drops it."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from zoo.bench.plan.cost import PROCESS_EXIT_S, PROCESS_START_S, REPORT_S, TERMS, CostModel

MODEL_FILE = Path(__file__).resolve().parent / "cost_model.json"
#: per device entry: the constants measured outside any group (not fitted; a refit keeps them), and defaults
MEASURED = {"process_start_s": PROCESS_START_S, "process_exit_s": PROCESS_EXIT_S, "report_s": REPORT_S}


def load_cost_model(device: str = "cpu", path: Path = MODEL_FILE) -> CostModel:
    """The shipped model for ``device`` (``cpu``, ``cuda``, or a torch device string); a device
    kind with no fitted entry falls back to ``cpu`` (stated in ``fitted_on``), and so does a mode
    factor its records did not measure (the ``cuda`` records hold no energy-at-init group)."""
    data = json.loads(Path(path).read_text())
    kind = str(device or "cpu").split(":")[0]
    kind = "cpu" if kind == "auto" else kind
    cpu = data["devices"]["cpu"]
    entry = data.get("devices", {}).get(kind) or {}
    fitted_on = entry.get("fitted_on", "") + (f"; provisional: {entry['provisional']}" if entry.get("provisional")
                                              else "")
    if not entry.get("coefficients"):
        entry = cpu
        fitted_on = f"no {kind} entry: the cpu fit ({entry.get('fitted_on', '')})"
    modes = {**(cpu.get("mode_factors") or {}), **(entry.get("mode_factors") or {})}
    measured = {k: float(entry.get(k, cpu.get(k, default))) for k, default in MEASURED.items()}
    return CostModel(dict(entry["coefficients"]), dict(entry.get("suite_factors") or {}), kind, fitted_on, modes,
                     unseen_suite_factor=float(entry.get("unseen_suite_factor", 1.0)),
                     dataset_factors=dict(entry.get("dataset_factors") or {}),
                     shape_factors=dict(entry.get("shape_factors") or {}),
                     long_run_factors=dict(entry.get("long_run_factors") or {}), **measured)


@functools.lru_cache(maxsize=4)
def provisional(device: str = "cuda", path: Path = MODEL_FILE) -> str:
    """Why the shipped entry of ``device`` is not yet a price (its ``provisional`` text), or ``""``.
    A refit (:func:`write_model`) drops it."""
    entry = json.loads(Path(path).read_text()).get("devices", {}).get(str(device).split(":")[0]) or {}
    return str(entry.get("provisional") or "")


@functools.lru_cache(maxsize=4)
def shipped_model(device: str = "cpu") -> CostModel:
    """:func:`load_cost_model` of the shipped file, read once per device kind."""
    return load_cost_model(device)


def write_model(models: Sequence[CostModel], path: Path, notes: Mapping[str, Any]) -> None:
    """``cost_model.json``: one entry per device (a device fitted here replaces its entry; the
    others, ``cuda`` included, are kept, or written empty)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        data = {}
    devices = dict(data.get("devices") or {})
    devices.setdefault("cpu", {})
    devices.setdefault("cuda", {})
    for m in models:
        kept = {k: v for k, v in devices.get(m.device, {}).items() if k in MEASURED}  # measured, not fitted
        devices[m.device] = {"coefficients": m.coefficients, "suite_factors": m.suite_factors,
                             "unseen_suite_factor": m.unseen_suite_factor, "mode_factors": m.mode_factors,
                             "dataset_factors": m.dataset_factors, "shape_factors": m.shape_factors,
                             "long_run_factors": m.long_run_factors, **kept,
                             "fitted_on": m.fitted_on, **{k: v for k, v in notes.items()}}
    doc = {"about": "zoo.bench.plan.cost coefficients, seconds per unit of each term; "
                    "written by `zoo bench calibrate RECORDS... --out FILE`",
           "terms": list(TERMS), "devices": devices}
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
