"""Probe: run the LipschitzNorm authors' released ``train_deepgat_missing.py`` itself, unmodified, and read its log.

The suites run the zoo's re-implementation of that script (``gat_lip_code_*``).  This probe runs the released file,
so a gap between the paper and the script can be told apart from a gap between the script and the zoo.

What is changed around the released code, and nothing inside it:
  * two import shims: ``torch_scatter`` (no wheel for current torch; ``torch_geometric.utils.scatter`` computes the
    same reductions) and ``torch_sparse`` (only reached by ``isinstance`` checks against ``SparseTensor``);
  * a seeding wrapper: the script sets no seed, so each run seeds ``random`` / ``numpy`` / ``torch`` with its
    seed and then executes the script with ``runpy``, one run (``--nexps 1``) a process;
  * the data: Planetoid's raw files are staged from the mirrors (``ZOO_DATA_MIRROR``, by
    ``zoo.datasets.mirror.stage_tree``) into a scratch folder, which is the script's ``--datadir`` (it writes its
    missing-feature indices there); the mirrors are never written.

The script prints train / val / test accuracy after every epoch and, after the last, ``Test accuracy=`` (its
``test()``).  The probe reports per run: the best validation accuracy and its epoch (the suite's reading,
§10.2's "validation classification accuracy"), the test accuracy at that epoch, and the script's own final test.

    OMP_NUM_THREADS=1 python research/probe_lipschitz_released_code.py --code PATH/TO/LipschitzNorm \\
        --seeds 0 1 2 3 4 --jobs 2 -- --dataset Cora --hidden_dim 64 --norm lipschitznorm --num_layers 5 \\
        --heads 4 --nepoch 1000 --lr 0.005

(the README's example command, which is Table 1's Cora GAT-Lip cell; gdasoulas/LipschitzNorm @ 25ddec3).
Results (stop 40, validation % at the best epoch; the paper 83.1 ± 0.5 at L = 5): the command above 78.52 ± 0.54
(79.2 / 78.8 / 78.6 / 77.8 / 78.2); --num_layers 2 80.04 ± 0.89 (5 seeds), 3 79.60, 4 79.07 (3 seeds each); --lr 0.01
78.00, --lr 0.001 78.73 (3 seeds each).  docs/notes/lipschitz_search.md, stop 40.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from zoo.datasets.mirror import mirror_dirs, stage_tree

SHIMS = {
    "torch_scatter/__init__.py": '''\
from torch_geometric.utils import scatter as _scatter


def scatter(src, index, dim=0, out=None, dim_size=None, reduce="sum"):
    return _scatter(src, index, dim=dim, dim_size=dim_size, reduce=reduce)


def scatter_mean(src, index, dim=0, out=None, dim_size=None):
    return _scatter(src, index, dim=dim, dim_size=dim_size, reduce="mean")
''',
    "torch_sparse/__init__.py": '''\
class SparseTensor:  # never instantiated: the script passes edge_index tensors
    pass


def set_diag(*args, **kwargs):
    raise NotImplementedError("the released script's SparseTensor path is not used")
''',
    "seeded_run.py": '''\
import os, random, runpy, sys
import numpy as np, torch
seed = int(sys.argv[1])
random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
sys.argv = [sys.argv[2]] + sys.argv[3:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python script.py` would
runpy.run_path(sys.argv[0], run_name="__main__")
''',
}

EPOCH = re.compile(r"^Epoch: (\d+) .*acc_val: ([\d.]+) acc_test: ([\d.]+)")
FINAL = re.compile(r"^Test accuracy= ([\d.]+)")


@dataclass(frozen=True)
class RunResult:
    seed: int
    best_val: float  # % at the first epoch reaching the maximum
    best_epoch: int
    test_at_best: float
    final_test: float  # the script's own test() after the last epoch
    epochs: int


def parse_log(seed: int, text: str) -> RunResult:
    """Read one run's stdout; the best validation epoch is the first that reaches the maximum."""
    epochs = [(int(m[1]), float(m[2]), float(m[3])) for m in map(EPOCH.match, text.splitlines()) if m]
    finals = [float(m[1]) for m in map(FINAL.match, text.splitlines()) if m]
    if not epochs or not finals:
        raise ValueError(f"seed {seed}: no epoch lines or no final 'Test accuracy=' in the script's output; "
                         "run it by hand to see its error")
    epoch, val, test = max(epochs, key=lambda e: (e[1], -e[0]))
    return RunResult(seed, 100 * val, epoch, 100 * test, 100 * finals[-1], len(epochs))


def write_shims(scratch: Path) -> None:
    """The import shims and the seeding wrapper, as files under ``scratch`` (which goes first on PYTHONPATH)."""
    for name, text in SHIMS.items():
        (scratch / name).parent.mkdir(parents=True, exist_ok=True)
        (scratch / name).write_text(text)


def prepare(scratch: Path, dataset: str) -> Path:
    """Shims and the wrapper in ``scratch``; the dataset's raw files staged from the mirrors into
    ``scratch/data/D/D/raw`` by the zoo's own staging (checksums, atomic copies; mirrors are never written)."""
    write_shims(scratch)
    data = scratch / "data"
    if not stage_tree(dataset, data / dataset, f"{dataset}/raw"):
        raise SystemExit(f"no {dataset}/raw in any mirror ({mirror_dirs() or 'none set'}): set ZOO_DATA_MIRROR to "
                         "the folder holding it (the shared mirror)")
    return data


def run_one(code: Path, scratch: Path, data: Path, seed: int, script_args: list[str]) -> RunResult:
    env = dict(os.environ, PYTHONPATH=str(scratch), MPLBACKEND="Agg")
    cmd = [sys.executable, str(scratch / "seeded_run.py"), str(seed), "train_deepgat_missing.py",
           "--device", "-1", "--datadir", str(data), "--nexps", "1", *script_args]
    out = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"seed {seed}: the released script failed:\n{out.stderr[-2000:]}")
    return parse_log(seed, out.stdout)


def summary(results: list[RunResult]) -> str:
    def ms(xs: list[float]) -> str:
        return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else f"{xs[0]:.2f}"
    rows = [f"seed {r.seed}: val {r.best_val:.1f} (epoch {r.best_epoch}), test there {r.test_at_best:.1f}, "
            f"final test {r.final_test:.1f}" for r in results]
    rows.append(f"best validation {ms([r.best_val for r in results])}; test at it "
                f"{ms([r.test_at_best for r in results])}; the script's final test {ms([r.final_test for r in results])}"
                f" (± sample std, {len(results)} runs)")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", type=Path, required=True, help="a checkout of gdasoulas/LipschitzNorm")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (one process each)")
    ap.add_argument("script_args", nargs=argparse.REMAINDER, help="after --: the released script's arguments")
    args = ap.parse_args()
    script_args = args.script_args[1:] if args.script_args[:1] == ["--"] else args.script_args
    if not (args.code / "train_deepgat_missing.py").is_file():
        raise SystemExit(f"no train_deepgat_missing.py in {args.code}: pass --code a LipschitzNorm checkout")
    dataset = script_args[script_args.index("--dataset") + 1] if "--dataset" in script_args else "Cora"
    with tempfile.TemporaryDirectory(prefix="lipnorm_code_") as tmp:
        scratch = Path(tmp)
        data = prepare(scratch, dataset)
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda s: run_one(args.code, scratch, data, s, script_args), args.seeds))
    print("released script:", " ".join(script_args))
    print(summary(results))


if __name__ == "__main__":
    main()
