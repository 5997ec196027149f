"""The summary file of ``benchmarks/gpu_check.py``: each step's state and figures against the targets,
read from the steps' logs and JSON files and the slice's records (no torch import: it runs anywhere)."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

SUMMARY = "gpu_check_summary.md"
#: targets: ours / PyG per replica-epoch at R = 15 and at R = 1, by speed_train config
SPEED_TARGETS = {"cora": (0.015, 0.25), "cornell": (0.01, 0.25), "pubmed": (0.10, 0.25)}
BUSY_TARGET_MS, BUSY_TARGET_SHARE, SLICE_TARGET_S = 12.0, 0.50, 90.0
SLICE_RUNS = 75
CPU_RECORDS = Path("docs") / "reproduction" / "records" / "balance_table2" / "results.jsonl"


def status(r: Any) -> str:
    if r.rc is None and not r.timed_out:
        return f"not run{': ' + r.note if r.note else ''}"
    state = f"stopped at its limit after {r.seconds:.0f} s" if r.timed_out else f"exit {r.rc}, {r.seconds:.0f} s"
    return state + (f"; {r.note}" if r.note else "")


def _mark(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _records(path: Path) -> List[Dict[str, Any]]:
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("status", "ok") == "ok"]


# --------------------------------------------------------------------------- reading the outputs


def test_counts(output: str) -> Dict[str, int]:
    """``{"passed": n, "failed": n, ...}`` from pytest's last line."""
    return {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed)", output)}


def env_facts(output: str) -> Optional[Dict[str, Any]]:
    m = re.search(r"^env-json: (.*)$", output, re.M)
    return json.loads(m.group(1)) if m else None


def _label(output: str, marker: str, default: str) -> str:
    """What a benchmark line says it measured (``cornell_npz gatv2 L=40 R=15 on cuda``)."""
    m = re.search(rf"^(.*?): {marker}", output, re.M)
    return m.group(1) if m else default


def busy_figures(output: str) -> Optional[Dict[str, float]]:
    """gpu_busy's line: wall ms per epoch, kernel ms per epoch, busy share, kernels per epoch."""
    m = re.search(r"wall/epoch ([\d.]+) ms, kernel time/epoch ([\d.]+) ms \(([\d.]+)% busy\), kernels/epoch (\d+)",
                  output)
    if not m:
        return None
    return {"wall_ms": float(m.group(1)), "kernel_ms": float(m.group(2)), "busy": float(m.group(3)) / 100,
            "kernels": float(m.group(4))}


def graphs_figures(output: str) -> Optional[Dict[str, float]]:
    """gpu_busy --graphs' line: ms per epoch with CUDA graphs on and off."""
    m = re.search(r"cuda graphs on ([\d.]+) ms/epoch, off ([\d.]+) ms/epoch", output)
    return None if not m else {"on_ms": float(m.group(1)), "off_ms": float(m.group(2))}


def _config_key(label: str) -> str:
    return label.split()[0]


# --------------------------------------------------------------------------- sections


def env_section(r: Any) -> List[str]:
    facts = env_facts(r.output) if r else None
    if not facts:
        return [f"## Environment ({status(r) if r else 'not run'})", "", "no figures (see env.log)", ""]
    return [f"## Environment ({status(r)})", "",
            f"- torch {facts['torch']} (CUDA {facts['cuda']}), {facts['device']}, {facts['cpu_cores']} CPU cores",
            f"- triton {facts['triton']}, torch_geometric {facts['torch_geometric']}, pytest {facts['pytest']}",
            f"- generator state under CUDA graphs: **{facts['rng']}** (per-capture: a failed capture leaves no "
            "generator in capture mode; per-generator: it may; default generator only: the replicas' dropout "
            "streams cannot be captured, so such runs train eagerly)", ""]


def tests_section(r: Any) -> List[str]:
    counts = test_counts(r.output)
    return [f"## CUDA tests ({status(r)})", "",
            ", ".join(f"{n} {k}" for k, n in counts.items()) or "no pytest summary line (see tests.log)", ""]


def records_section(r: Any, data: Optional[Mapping[str, Any]]) -> List[str]:
    lines = [f"## Graph records against eager records ({status(r)})", ""]
    if not data:
        return lines + ["no figures (see records.log)", ""]
    lines += ["| config | graph fit | graph vs eager: replicas differing, test diff, val-loss diff | "
              "eager vs eager (noise floor) | within the noise floor |", "|---|---|---|---|---|"]
    for name, c in data.items():
        g, n = c["graph_vs_eager"], c["eager_vs_eager"]
        within = (len(g["replicas_differing"]) <= len(n["replicas_differing"])
                  and g["largest_val_loss_diff"] <= max(n["largest_val_loss_diff"], 1e-5))
        lines.append(f"| {name} | {', '.join(c['graph']['cuda_graphs'])} ({c['graph']['seconds']:.1f} s; eager "
                     f"{c['eager']['seconds']:.1f} s) | {len(g['replicas_differing'])}, "
                     f"{g['largest_test_diff']:.4f}, {g['largest_val_loss_diff']:.3g} | "
                     f"{len(n['replicas_differing'])}, {n['largest_test_diff']:.4f}, {n['largest_val_loss_diff']:.3g} "
                     f"| {'yes' if within else 'NO'} |")
        for key in ("graph", "eager"):
            f = c[key]
            lines.append(f"|  {key}: epochs-to-best {_spread(f['epochs_to_best'])}, epochs run "
                         f"{_spread(f['epochs_run'])}, stop {_counts(f['stop_reason'])}, test "
                         f"{_mean(f['test']):.4f} | | | | |")
    return lines + [""]


def _spread(values: Sequence[Any]) -> str:
    xs = [v for v in values if v is not None]
    return f"{min(xs)}-{max(xs)}" if xs else "–"


def _counts(values: Iterable[str]) -> str:
    c: Dict[str, int] = defaultdict(int)
    for v in values:
        c[v] += 1
    return ", ".join(f"{k} {n}" for k, n in sorted(c.items()))


def _mean(values: Sequence[Optional[float]]) -> float:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def speed_section(r: Any, data: Optional[Mapping[str, Any]]) -> List[str]:
    lines = [f"## Training speed against PyG, ms per replica-epoch, steady state ({status(r)})", ""]
    if not data:
        return lines + ["no figures (see speed.log)", ""]
    lines += [f"{data['machine']}; {data['epochs']} epochs per timing, best of {data['repeat']}", "",
              "| config | cuda_graphs | PyG | ours | ours / PyG | target |", "|---|---|---|---|---|---|"]
    for row in data["rows"]:
        targets = SPEED_TARGETS.get(_config_key(row["config"]), (None, None))
        for o in row["ours"]:
            target = {15: targets[0], 1: targets[1]}.get(o["replicas"])  # the targets are for R = 15 and R = 1
            verdict = f"≤ {target} {_mark(o['ratio'] <= target)}" if target is not None else "–"
            lines.append(f"| {row['config']} R={o['replicas']} | {o['cuda_graphs']} | {row['pyg_ms']:.2f} | "
                         f"{o['ms']:.2f} | {o['ratio']:.3f} | {verdict} |")
    return lines + [""]


def busy_section(r: Any) -> List[str]:
    fig = busy_figures(r.output)
    label = _label(r.output, "wall/epoch", "cornell_npz gatv2 L=40 R=15")
    lines = [f"## GPU busy, {label}, device events only ({status(r)})", ""]
    if not fig:
        return lines + ["no figure (see busy.log)", ""]
    return lines + [f"wall {fig['wall_ms']:.2f} ms/epoch (target ≤ {BUSY_TARGET_MS:g}: "
                    f"{_mark(fig['wall_ms'] <= BUSY_TARGET_MS)}), kernels {fig['kernel_ms']:.2f} ms/epoch, busy "
                    f"{100 * fig['busy']:.1f} % (target ≥ {100 * BUSY_TARGET_SHARE:.0f} %: "
                    f"{_mark(fig['busy'] >= BUSY_TARGET_SHARE)}), {fig['kernels']:.0f} device events/epoch", ""]


def graphs_section(r: Any) -> List[str]:
    fig = graphs_figures(r.output)
    label = _label(r.output, "cuda graphs on", "cornell_npz gatv2 L=40 R=15")
    return [f"## CUDA graphs on vs off, {label} ({status(r)})", "",
            (f"on {fig['on_ms']:.2f} ms/epoch (target ≤ {BUSY_TARGET_MS:g}: {_mark(fig['on_ms'] <= BUSY_TARGET_MS)}), "
             f"off {fig['off_ms']:.2f} ms/epoch, on/off {fig['on_ms'] / fig['off_ms']:.3f}x") if fig
            else "no figure (see graphs.log)", ""]


# --------------------------------------------------------------------------- the slice


def slice_groups(records: Sequence[Mapping[str, Any]]) -> Dict[int, Dict[str, Any]]:
    """The slice's finished groups by depth: runs, group wall time, ms per epoch, mean test accuracy."""
    by: Dict[int, List[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by[int(r["config"]["model"]["kwargs"].get("num_layers", 0))].append(r)
    return {k: {"runs": len(v), "wall_s": max(float(r.get("group_wall_time_s") or 0) for r in v),
                "ms_per_epoch": 1e3 * float(v[0].get("time_per_epoch_s") or 0),
                "epochs": max(int(r.get("epochs_run") or 0) for r in v),
                "mean_test": sum(float(r["metrics"]["test"]) for r in v) / len(v)} for k, v in sorted(by.items())}


def agreement(ours: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]]) -> Tuple[int, int, float]:
    """Runs of ``ours`` with a record of the same id in ``theirs``: ``(matched, same test accuracy, largest
    test accuracy difference)``."""
    other = {r["id"]: r for r in theirs}
    pairs = [(float(r["metrics"]["test"]), float(other[r["id"]]["metrics"]["test"])) for r in ours if r["id"] in other]
    return len(pairs), sum(a == b for a, b in pairs), max((abs(a - b) for a, b in pairs), default=0.0)


def extrapolate(done: Mapping[int, Mapping[str, Any]], cpu: Sequence[Mapping[str, Any]],
                depths: Iterable[int]) -> Dict[int, float]:
    """Seconds each unfinished depth's group would take: the epochs its CPU records ran, at the ms per
    epoch of the finished groups fitted linearly in the depth (proportional with one finished group)."""
    points = [(L, g["ms_per_epoch"]) for L, g in done.items() if g["ms_per_epoch"] > 0]
    if not points:
        return {}
    if len(points) == 1:
        slope, base = points[0][1] / points[0][0], 0.0
    else:
        n = len(points)
        mx, my = sum(L for L, _ in points) / n, sum(m for _, m in points) / n
        slope = sum((L - mx) * (m - my) for L, m in points) / max(sum((L - mx) ** 2 for L, _ in points), 1e-12)
        base = my - slope * mx
    epochs: Dict[int, int] = defaultdict(int)
    for r in cpu:
        L = int(r["config"]["model"]["kwargs"].get("num_layers", 0))
        epochs[L] = max(epochs[L], int(r.get("epochs_run") or 0))
    return {L: (epochs[L] + 1) * max(base + slope * L, 0.0) / 1e3 for L in depths if L not in done and epochs[L]}


def slice_section(r: Any, out: Path, root: Path, h200: Path) -> List[str]:
    ours = _records(out / "balance_table2" / "results.jsonl")
    cpu = [c for c in _records(root / CPU_RECORDS) if c["config"]["task"]["dataset"] == "cornell_npz"]
    earlier = _records(h200)
    groups = slice_groups(ours)
    finished = r.rc == 0
    lines = [f"## balance_table2, dataset=cornell_npz, a fixed {r.seconds:.0f} s ({status(r)})", "",
             (f"slice wall {r.seconds:.0f} s (target ≤ {SLICE_TARGET_S:g} s: {_mark(r.seconds <= SLICE_TARGET_S)})"
              if finished else f"{len(ours)} of {SLICE_RUNS} runs recorded in {r.seconds:.0f} s"), "",
             "| L | runs | group wall | ms/epoch | epochs (longest) | mean test |", "|---|---|---|---|---|---|"]
    lines += [f"| {L} | {g['runs']} | {g['wall_s']:.1f} s | {g['ms_per_epoch']:.2f} | {g['epochs']} | "
              f"{g['mean_test']:.4f} |" for L, g in groups.items()]
    for label, theirs in (("the committed CPU records", cpu), (f"the earlier H200 records ({h200.name})", earlier)):
        matched, same, gap = agreement(ours, theirs)
        lines += ["", f"Against {label}: {matched} runs with the same cell id, test accuracy identical in {same}, "
                      f"largest difference {gap:.4f}."]
    rest = extrapolate(groups, cpu, [2, 5, 10, 20, 40])
    if rest:
        total = sum(g["wall_s"] for g in groups.values()) + sum(rest.values())
        lines += ["", "Unfinished groups, extrapolated (the epochs their CPU records ran, at the finished groups' ms "
                      "per epoch fitted linearly in L): " + ", ".join(f"L={L} ≈ {s:.0f} s" for L, s in rest.items())
                  + f"; the slice's groups one after another ≈ {total:.0f} s (target ≤ {SLICE_TARGET_S:g} s: "
                  f"{_mark(total <= SLICE_TARGET_S)})."]
    return lines + [""]


# --------------------------------------------------------------------------- fallbacks, calibration


def fallbacks(records_json: Optional[Mapping[str, Any]], slice_records: Sequence[Mapping[str, Any]]) -> List[str]:
    """Every run that did not replay its epochs where it could have: ``fell back (...)`` / ``eager (...)``."""
    seen: Dict[str, int] = defaultdict(int)
    for name, c in (records_json or {}).items():
        for state in c["graph"]["cuda_graphs"]:
            if state != "replayed":
                seen[f"records {name}: {state}"] += 1
    for r in slice_records:
        state = str(r.get("cuda_graphs", "not recorded"))
        if state != "replayed":
            seen[f"slice L={r['config']['model']['kwargs'].get('num_layers')}: {state}"] += 1
    lines = ["## Fallbacks (runs whose epochs were not replayed)", ""]
    return lines + ([f"- {k} ({n} run(s))" for k, n in sorted(seen.items())] or ["none"]) + [""]


def calibrate_section(r: Any, out: Path) -> List[str]:
    lines = [f"## The cost model's `cuda` entry refitted on the slice's records ({status(r)})", ""]
    model = _json(out / "cost_model.json")
    if r.rc != 0 or not model:
        last = [ln for ln in r.output.strip().splitlines() if ln.strip()][-1:] or ["no output"]
        return lines + [f"not refitted: {last[0]}", ""]
    return lines + [f"`{out / 'cost_model.json'}`: " + "; ".join(ln.strip() for ln in r.output.splitlines()
                                                                   if ln.strip()), ""]


def summary(results: Mapping[str, Any], out: Path, root: Path, h200: Path, header: Sequence[str] = ()) -> str:
    """The summary file's text: each step's state and figures against the targets."""
    lines = ["# GPU check", "", *header, ""]
    records_json = _json(out / "records.json")
    sections = {"env": lambda r: env_section(r), "tests": tests_section,
                "records": lambda r: records_section(r, records_json),
                "speed": lambda r: speed_section(r, _json(out / "speed.json")), "busy": busy_section,
                "graphs": graphs_section, "slice": lambda r: slice_section(r, out, root, h200),
                "calibrate": lambda r: calibrate_section(r, out)}
    for name, section in sections.items():
        if name in results:
            lines += section(results[name])
    lines += fallbacks(records_json, _records(out / "balance_table2" / "results.jsonl"))
    return "\n".join(lines)
