"""Shared fixtures: small graphs with the awkward cases every model must survive."""
from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

import zoo

REPO = Path(__file__).resolve().parents[1]


# Test graphs are tiny, so kernels are overhead-bound; several intra-op threads only wait on
# each other (badly so on a loaded 2-core CI machine). One thread is faster and repeatable.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


def papers_dir() -> Path:
    """The papers' text (``shared/papers/*.md`` beside the checkout, or ``$ZOO_PAPERS``); skips
    the calling test where it is not on this machine."""
    candidates = [os.environ.get("ZOO_PAPERS"), REPO.parent / "shared" / "papers"]
    mirror = os.environ.get("ZOO_DATA_MIRROR")
    if mirror:  # the datasets' mirror sits beside the papers (../shared/datasets)
        candidates.append(Path(mirror).parent / "papers")
    for c in candidates:
        if c and Path(c).is_dir() and any(Path(c).glob("*.md")):
            return Path(c)
    pytest.skip("the papers' text is not here: set ZOO_PAPERS to the folder of the papers' .md files")


def research_script(name: str) -> ModuleType:
    """A script under research/ as a module (the scripts are not a package), for testing its functions."""
    spec = importlib.util.spec_from_file_location(name.removesuffix(".py"), REPO / "research" / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses under postponed annotations look their module up there
    spec.loader.exec_module(module)
    return module


#: The line a :func:`started_together` child runs once its imports are done: it says so, then waits for the go.
AT_THE_START_LINE = "import sys; print('ready', flush=True); sys.stdin.readline()"


def started_together(argv: list, copies: int = 2, **popen) -> list:
    """``copies`` processes of ``argv`` (a script that runs :data:`AT_THE_START_LINE` after its imports),
    released at one moment once all are ready (a race between two pytest workers, without a fixed sleep
    that must outlast the slowest import); their stdout after the ready line is theirs."""
    import subprocess

    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, **popen) for _ in range(copies)]
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "ready":  # died during its imports: its error is in the test's failure
            for q in procs:
                q.kill()
            raise AssertionError(f"a racing process did not start: {line!r} {p.stderr.read()[-2000:]}")
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return procs


#: The xdist group of the test modules that read :func:`shipped_suite`: one worker resolves each suite once.
SHIPPED_SUITES_GROUP = "shipped_suites"


@functools.lru_cache(maxsize=None)
def shipped_suite(name: str):
    """The shipped suite ``name`` resolved without its dry model builds (``load_suite(name,
    validate_models=False)``), once per test process: lipschitz_table1's 10,000 cells take seconds. Read it,
    never change it (a test that edits a suite loads its own); modules that read it share the xdist group
    :data:`SHIPPED_SUITES_GROUP`."""
    from zoo.bench.suite.load import load_suite

    return load_suite(name, validate_models=False)


def awkward_graph() -> tuple:
    """7 nodes: node 6 isolated, a self-loop on node 2, a duplicated edge 0->1, a directed edge 5->4."""
    edges = [(0, 1), (1, 0), (0, 1), (1, 2), (2, 1), (2, 2), (2, 3), (3, 2), (3, 4), (4, 3), (5, 4), (0, 3)]
    edge_index = torch.tensor(edges, dtype=torch.long).t().contiguous()
    return edge_index, 7


def tiny_twin_suite(name: str) -> dict:
    """A raw two-run suite (1-layer GAT on twin, 2 epochs, seeds 0 and 1) for runner tests."""
    return {
        "suite": {"name": name},
        "defaults": {"dataset": "twin", "model": "gat", "num_layers": 1, "hidden_dim": 8, "epochs": 2,
                     "optimizer": "adam", "lr": 0.01},
        "grid": {"seed": [0, 1]},
        "leaderboard": {"rows": ["model"], "columns": "num_layers", "metric": "test"},
    }


def seeded_double_models(name: str, seeds=(0, 1), **kwargs) -> list:
    """One float64 ``zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=3, **kwargs)`` per
    seed: the replicas the fused-kernel tests stack under vmap."""
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(zoo.build(name, in_dim=6, out_dim=3, hidden_dim=8, num_layers=3, **kwargs).double())
    return models


def record_calls(monkeypatch, target: str) -> list:
    """Replace ``target`` (a dotted path, e.g. ``"zoo.ops.dispatch.gatv2_score"``) by a wrapper that
    appends ``1`` to the returned list on every call: which kernel the dispatch took."""
    module, name = target.rsplit(".", 1)
    original = getattr(importlib.import_module(module), name)
    calls = []

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(target, spy)
    return calls


def training_outputs_and_grads(models: list, edge_index: torch.Tensor, x: torch.Tensor,
                               streams: str = "global") -> tuple:
    """Training ``models[0]`` alone (global seed 3), then every model stacked under vmap (seed 4): the
    outputs and parameter gradients of both, for comparing kernels (deterministic without dropout).

    ``streams``: ``"global"`` draws dropout masks from torch's global generator; ``"replica"`` from each
    replica's own stream (seeds 5 and 9), as the runner's stacked training does."""
    from torch.func import functional_call, stack_module_state, vmap

    from zoo.ops.dropout import ReplicaRandomness, replica_randomness

    for m in models:
        m.train()
    params, buffers = stack_module_state(models)

    def call(p, b, token):
        if streams == "global":
            return functional_call(models[0], (p, b), (edge_index, x))
        with replica_randomness(ReplicaRandomness([5, 9][:len(models)]), token):
            return functional_call(models[0], (p, b), (edge_index, x))

    torch.manual_seed(3)
    single = call(dict(models[0].named_parameters()), dict(models[0].named_buffers()), torch.tensor(0))
    g_single = torch.autograd.grad(single.square().sum(), list(models[0].parameters()))
    torch.manual_seed(4)
    stacked = vmap(call, randomness="different")(params, buffers, torch.arange(len(models)))
    g_stacked = torch.autograd.grad(stacked.square().sum(), list(params.values()))
    return (single, stacked) + g_single + g_stacked


@pytest.fixture
def graph():
    edge_index, n = awkward_graph()
    return edge_index, torch.randn(n, 6)


@pytest.fixture
def single_node():
    return torch.empty(2, 0, dtype=torch.long), torch.randn(1, 6)


def small_kwargs(name: str) -> dict:
    """Options that make every registered model small and valid (heads where supported)."""
    kwargs = dict(in_dim=6, out_dim=3, hidden_dim=8, num_layers=3)
    cls = zoo.registry.MODELS.get(name)
    if "heads" in zoo.registry.constructor_options(cls) and getattr(cls, "supports_heads", True):
        kwargs["heads"] = 2
    return kwargs


@pytest.fixture
def mirror() -> Path:
    """The dataset mirror (``ZOO_DATA_MIRROR``, else ../shared/datasets)."""
    path = Path(os.environ.get("ZOO_DATA_MIRROR", str(REPO.parent / "shared" / "datasets")).split(os.pathsep)[0])
    if not path.exists():
        pytest.skip(f"dataset mirror not found at {path}; set ZOO_DATA_MIRROR")
    return path
