"""How far the costliest remaining paper shapes run from this CPU's roofline, and where the time goes.

For each shape (one group of a paper suite, built and trained exactly as ``zoo bench`` does:
``build_replicas`` + ``train_replicas``, or the energy mode's build + forward) in this process, on
one torch thread:

* the CPU time per replica-epoch (process CPU time, after a warm-up epoch);
* the epoch's floating-point work and memory traffic, counted from the model's shapes (the rules
  are :func:`count_work`'s docstring), and the GFLOP/s and GB/s they make at that time;
* the machine's own ceilings measured in the same run: a dense product of the shape's hidden-layer
  size (``torch.bmm`` over the stacked replicas, as the layers run it) for compute, a stream copy of
  256 MiB for bandwidth;
* ``fraction of roofline``: the time the counted work needs at those ceilings (dense products at the
  product's rate, everything else at the copy's bandwidth) over the time measured (1 = at the roof);
* with ``--profile``, the epoch's CPU self time grouped by op class (``torch.profiler``): dense
  products, edge gathers / scatters / sparse products and the compiled attention, softmax,
  element-wise, the optimiser step (every op under it), and Python / dispatch (the profiled time
  no op accounts for, the profiler's own cost included).  Read it as a rough guide: the profiler's
  own allocations keep the heap from reusing the freed large tensors, so every op that allocates a
  large output page-faults it in anew and its self time holds those faults (table7: ~6x the page
  faults of an unprofiled epoch, more with ``record_shapes``, and the ReLUs looked 6-10x their
  cost); ``perf record`` of an unprofiled run gives the shares without that.

``--ref DIR``: the same shapes timed against another checkout of the zoo (e.g. a git worktree of an
earlier commit) in fresh processes, ``--pairs K`` per side, the two sides alternating (this script's
timing code, the other checkout's ``zoo``).  Each side's figure for a shape is the **median over its
K processes** of the CPU time per replica-epoch, printed with the spread (min / median / max) and the
median share of system time; the shape's ratio is new median / ref median (the per-pair ratios
follow in brackets), and the closing line is the mean over shapes of each side's median and their
ratio.  One process's figure is not a steady statistic where a side's heap gives memory back to the
kernel between epochs: the CPU time includes the system time of faulting it in again, and how much is
given back (glibc trims a free heap top above its trim threshold: the reference 721b193's 1 GiB, below
the top Oxford's epoch frees) depends on the order of the frees, and the cost of a fault on the machine
(a virtual machine's host may have taken the freed memory back).  The user time stays steady; a side
with a large system-time share pays such faults.  Use K >= 3 for a figure to compare
(docs/notes/performance.md, "The reference's unsteady Oxford figure").

    python benchmarks/roofline.py [--shapes table7,table3_4,...] [--epochs 5] [--profile]
    python benchmarks/roofline.py --ref ../wt-ref --pairs 5
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Shape:
    """One group of a suite: ``where`` selects its cells (``zoo bench SUITE --where ...``)."""

    label: str
    suite: str
    where: Mapping[str, Sequence[Any]]


#: the shapes of the remaining paper cells (issue: "Breadth at the roofline"), one group each, as the
#: queues' commands build them (a command selecting one init trains its 5 seeds as one group)
SHAPES: Dict[str, Shape] = {
    "table7": Shape("balance_table7 Cora GCN L=64 w64, SGD, R=5", "balance_table7",
                    {"dataset": ["cora"], "num_layers": [64], "init": ["balanced_orthogonal"]}),
    "table3_4": Shape("balance_table3_4 Cora GATv2 L=10 w64, Adam, R=15", "balance_table3_4",
                      {"dataset": ["cora"], "num_layers": [10], "variant": ["adam_vanilla"]}),
    "table2": Shape("balance_table2 Actor GATv2 L=10 w64, SGD, R=15", "balance_table2",
                    {"dataset": ["actor_npz"], "num_layers": [10]}),
    "squirrel": Shape("balance_table2 Squirrel GATv2 L=10 w64, SGD, R=15", "balance_table2",
                      {"dataset": ["squirrel_npz"], "num_layers": [10]}),
    # one init (5 seeds, as the queues' groups): all three inits stacked need ~10 GB
    "pubmed": Shape("balance_table2 PubMed GATv2 L=20 w64, SGD, R=5", "balance_table2",
                    {"dataset": ["pubmed"], "num_layers": [20], "init": ["xavier"]}),
    "pubmed10": Shape("balance_table2 PubMed GATv2 L=10 w64, SGD, R=5", "balance_table2",
                      {"dataset": ["pubmed"], "num_layers": [10], "init": ["xavier"]}),
    "actor40": Shape("balance_table2 Actor GATv2 L=40 w64, SGD, R=5", "balance_table2",
                     {"dataset": ["actor_npz"], "num_layers": [40], "init": ["xavier"]}),
    "energy": Shape("nonlocal_energy PubMed SAN Pre-LN L=128 w32 fp64, R=10", "nonlocal_energy",
                    {"dataset": ["pubmed"], "num_layers": [128], "variant": ["san_pre_ln"]}),
    "oxford4": Shape("oxford_table4 Amazon Computers GATv2 (a) L=2 8x8, Adam, R=5", "oxford_table4",
                     {"dataset": ["amazon_computers"], "variant": ["gatv2_a"]}),
    "coauthor_cs": Shape("oxford_table4 Coauthor CS GAT (a) L=2 8x8, Adam, R=5", "oxford_table4",
                         {"dataset": ["coauthor_cs"], "variant": ["gat_a"]}),
    "coauthor_physics": Shape("oxford_table4 Coauthor Physics GAT (a) L=2 8x8, Adam, R=5", "oxford_table4",
                              {"dataset": ["coauthor_physics"], "variant": ["gat_a"]}),
    "lip3_gat": Shape("lipschitz_table3 Cora GAT L=30 8x8, attn drop 0.5, Adam, R=5", "lipschitz_table3",
                      {"dataset": ["cora"], "num_layers": [30], "variant": ["gat"], "heads": [8],
                       "attn_dropout": [0.5]}),
    "lip3_lip": Shape("lipschitz_table3 Cora GAT-Lip L=30 8x8, attn drop 0.5, Adam, R=5", "lipschitz_table3",
                      {"dataset": ["cora"], "num_layers": [30], "variant": ["gat_lip"], "heads": [8],
                       "attn_dropout": [0.5]}),
    "lip3_gat_1h": Shape("lipschitz_table3 Cora GAT L=30 1x64, Adam, R=5", "lipschitz_table3",
                         {"dataset": ["cora"], "num_layers": [30], "variant": ["gat"], "heads": [1],
                          "attn_dropout": [0.0]}),
    "lip3_lip_1h": Shape("lipschitz_table3 Cora GAT-Lip L=30 1x64, Adam, R=5", "lipschitz_table3",
                         {"dataset": ["cora"], "num_layers": [30], "variant": ["gat_lip"], "heads": [1],
                          "attn_dropout": [0.0]}),
    "bt6_citeseer_lip": Shape("balance_table6 CiteSeer GAT LipschitzNorm (authors) L=40 8x64, Adam, R=5",
                              "balance_table6", {"dataset": ["citeseer"], "num_layers": [40],
                                                 "variant": ["lipschitz_authors"]}),
    "bt6_cora_lip": Shape("balance_table6 Cora GAT LipschitzNorm (authors) L=20 8x64, Adam, R=5", "balance_table6",
                          {"dataset": ["cora"], "num_layers": [20], "variant": ["lipschitz_authors"]}),
    "bt6_pubmed_lip": Shape("balance_table6 PubMed GAT LipschitzNorm (authors) L=5 8x64, Adam, R=5",
                            "balance_table6", {"dataset": ["pubmed"], "num_layers": [5],
                                               "variant": ["lipschitz_authors"]}),
    "bt6_pubmed_balo": Shape("balance_table6 PubMed GATv2 Bal_O L=20 w64, SGD, R=5", "balance_table6",
                             {"dataset": ["pubmed"], "num_layers": [20], "variant": ["bal_o"]}),
    "bt6_citeseer_balo": Shape("balance_table6 CiteSeer GATv2 Bal_O L=40 w64, SGD, R=5", "balance_table6",
                               {"dataset": ["citeseer"], "num_layers": [40], "variant": ["bal_o"]}),
    # one split per seed (data_seed = "seed"): each run is a group of its own
    "san_cs": Shape("nonlocal_accuracy Coauthor CS SAN Post-LN L=2 w32, Adam, R=1", "nonlocal_accuracy",
                    {"dataset": ["coauthor_cs"], "num_layers": [2], "model": ["san_post_ln"], "seed": [0]}),
    "san_cs_nl": Shape("nonlocal_accuracy Coauthor CS SAN nonlocal L=2 w32, Adam, R=1", "nonlocal_accuracy",
                       {"dataset": ["coauthor_cs"], "num_layers": [2], "model": ["san_nonlocal"], "seed": [0]}),
    "san_pubmed_nl": Shape("nonlocal_accuracy PubMed SAN nonlocal L=2 w32, Adam, R=1", "nonlocal_accuracy",
                           {"dataset": ["pubmed"], "num_layers": [2], "model": ["san_nonlocal"], "seed": [0]}),
    "san_cora32": Shape("nonlocal_accuracy Cora SAN Post-LN L=32 w32, Adam, R=1", "nonlocal_accuracy",
                        {"dataset": ["cora"], "num_layers": [32], "model": ["san_post_ln"], "seed": [0]}),
}


# --------------------------------------------------------------------------- building a group


@dataclass
class Group:
    shape: Shape
    mode: str
    cells: List[Any]
    task: Any


def _task_cache() -> Any:
    try:  # where the runner keeps it now; before the trainer's cell adapter: the driver
        from zoo.trainer.cells import TaskCache
    except ImportError:
        from zoo.bench.run.driver import TaskCache  # type: ignore[no-redef]
    return TaskCache()


def load_group(shape: Shape) -> Group:
    from zoo.bench.suite.load import load_suite
    from zoo.bench.suite.selection import select_where

    suite = load_suite(shape.suite, validate_models=False)
    selected = {c.id for c in select_where(suite, dict(shape.where))}
    groups = [[c for c in g if c.id in selected] for g in suite.groups().values()]
    cells = next(g for g in groups if g)
    return Group(shape, suite.mode, cells, _task_cache().get(cells[0].config["task"]))


def with_epochs(cells: Sequence[Any], epochs: int) -> List[Any]:
    """The cells with ``epochs`` epochs and no early stop (every replica trains every epoch)."""
    out = []
    for c in cells:
        config = copy.deepcopy(c.config)
        config["train"].update(epochs=epochs, loss_threshold=0.0, patience=None)
        out.append(dataclasses.replace(c, config=config))
    return out


def _usage() -> Dict[str, float]:
    """This process's CPU seconds (user + system, all threads), user and system apart, and minor faults."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu": time.process_time(), "user": r.ru_utime, "sys": r.ru_stime, "minflt": float(r.ru_minflt)}


def run_usage(group: Group, epochs: int) -> Dict[str, float]:
    """:func:`_usage`'s figures spent by the runner's ``run_group`` on the group (build + ``epochs``
    epochs, or the energy mode)."""
    from zoo.bench.run.driver import run_group

    cells = group.cells if group.mode == "energy_at_init" else with_epochs(group.cells, epochs)
    start = _usage()
    run_group(group.mode, cells, group.task, torch.device("cpu"), True)
    end = _usage()
    return {k: end[k] - start[k] for k in start}


def run(group: Group, epochs: int) -> float:
    """CPU seconds of the runner's ``run_group`` on the group (build + ``epochs`` epochs, or the energy mode)."""
    return run_usage(group, epochs)["cpu"]


def time_group_usage(group: Group, epochs: int) -> Dict[str, float]:
    """Per replica-epoch: ``run_group`` at ``1 + epochs`` epochs less at 1 epoch, so that the build
    cancels (energy: the whole group per replica, build included) — CPU, user and system seconds and
    minor faults."""
    r = len(group.cells)
    run_usage(group, 1)  # warm-up: graph caches, allocator, compiled kernels
    if group.mode == "energy_at_init":
        return {k: v / r for k, v in run_usage(group, 0).items()}
    one = run_usage(group, 1)
    more = run_usage(group, 1 + epochs)
    return {k: (more[k] - one[k]) / (epochs * r) for k in one}


def time_group(group: Group, epochs: int) -> float:
    """CPU seconds per replica-epoch (:func:`time_group_usage`)."""
    return time_group_usage(group, epochs)["cpu"]


# --------------------------------------------------------------------------- counting the work


@dataclass
class Work:
    """Floating-point operations and bytes moved by one replica-epoch, by class."""

    dense_flops: float = 0.0
    dense_bytes: float = 0.0
    other_flops: float = 0.0
    other_bytes: float = 0.0
    notes: List[str] = field(default_factory=list)

    @property
    def flops(self) -> float:
        return self.dense_flops + self.other_flops

    @property
    def bytes(self) -> float:
        return self.dense_bytes + self.other_bytes

    def dense(self, m: float, k: float, n: float, item: int, passes: float) -> None:
        """``passes`` products of ``(m, k) @ (k, n)``: 2mkn flops; operands and result read / written once."""
        self.dense_flops += passes * 2 * m * k * n
        self.dense_bytes += passes * item * (m * k + k * n + m * n)

    def stream(self, flops: float, elements: float, item: int) -> None:
        """Memory-bound work: ``elements`` read or written once each."""
        self.other_flops += flops
        self.other_bytes += elements * item


def graph_sizes(group: Group) -> Dict[str, float]:
    from zoo.graph import as_graph

    d = group.task.data
    x = d.x
    policy = group.cells[0].config["model"]["kwargs"].get("self_loops", "add")
    g = as_graph(d.edge_index, x, policy)
    nnz = float((x != 0).sum())
    return {"n": float(x.size(0)), "e": float(g.num_edges), "f": float(x.size(1)), "nnz": nnz,
            "classes": float(group.task.num_classes)}


def count_work(group: Group) -> Work:
    """The work of one replica-epoch, counted from the shapes (N nodes, E edges with self-loops, F input
    features of which nnz non-zero, width C, H heads, L layers), in the model's dtype.

    Rules (per replica):
    * a training epoch is the forward, the backward (2x the forward's products: input and weight
      gradients; 1x for the first layer, whose input needs no gradient) and, with dropout, an
      evaluation forward; the energy mode is one forward plus the per-layer energy;
    * dense products 2mkn flops, traffic = operands + result once (the first layer of a
      bag-of-words input, when the zoo multiplies it as CSR, counts nnz x C multiply-adds and
      reads nnz values + indices; an input of at most 50 % non-zeros, whose stacked replicas keep
      only their dropped copies' kept entries, counts (1 - dropout) x nnz in training);
    * edge work (gathers, scores, softmax, aggregation, their gradients): each (E, width) operand
      read once and each (N, width) result written once per pass — a fused kernel's traffic;
      GATv2 score: 4 flops per edge and channel (add, LeakyReLU, product, sum), aggregation 2,
      softmax 5 per edge and head; GCN: 2 per edge and channel;
    * element-wise (activations, norms, residuals, loss): one read and one write of each (N, C) tensor;
    * the optimiser: SGD 2 flops and 3 tensors (parameter, gradient, parameter) per parameter,
      Adam 10 flops and 7 tensors (parameter, gradient, two moments, each read; three written).
    """
    cfg = group.cells[0].config
    kw = dict(cfg["model"]["kwargs"])
    name = cfg["model"]["name"]
    item = 8 if cfg["run"]["dtype"] == "float64" else 4
    s = graph_sizes(group)
    n, e, f, nnz, k = s["n"], s["e"], s["f"], s["nnz"], s["classes"]
    layers = int(kw.get("num_layers", 2))
    w = Work()
    energy = group.mode == "energy_at_init"
    dropout = any(float(kw.get(key) or 0) > 0 for key in ("dropout", "attn_dropout", "input_dropout"))
    fwd_passes = 1.0 if energy else (2.0 if dropout else 1.0)  # forwards per epoch
    bwd = 0.0 if energy else 2.0  # backward ~ 2 forwards
    params = 0.0
    if name.startswith("san"):
        c = float(kw.get("hidden_dim", 32))
        w.dense(nnz, 1, c, item, fwd_passes + bwd / 2)  # encoder's first map as CSR: nnz x C multiply-adds
        w.dense(n, c, c, item, fwd_passes + bwd)
        params += f * c + c * c
        for _ in range(layers):
            for _q in range(4):  # Q, K, V, O
                w.dense(n, c, c, item, fwd_passes + bwd)
            w.dense(n, c, 2 * c, item, fwd_passes + bwd)
            w.dense(n, 2 * c, c, item, fwd_passes + bwd)
            params += 4 * c * c + 4 * c * c
            passes = fwd_passes + bwd
            w.stream(passes * (4 * e * c + 5 * e), passes * (2 * e * c + 2 * n * c + 3 * e), item)  # scores, softmax, P X V
            w.stream(passes * 20 * n * c, passes * 8 * n * c, item)  # 2 LayerNorms, residuals, ReLU
            if energy:
                w.stream(3 * e * c, e * c + n * c, 8)  # the layer's Laplacian energy (float64)
        w.dense(n, c, k, item, fwd_passes + bwd)
    else:
        c = float(kw.get("hidden_dim", 64))
        heads = int(kw.get("heads", 1))
        out_heads = int(kw.get("out_heads", heads))
        # a bag-of-words input is multiplied as CSR, dropped or not (stacked replicas: each its own
        # dropped copy's stored entries, zoo.ops.gemm_order)
        sparse_first = nnz / (n * f) <= 0.05
        # at most 50 % non-zero (zoo.ops.sparse_linear.EACH_MAX_DENSITY): each replica's kept entries
        # (training: forward and weight gradient), the input's (evaluation)
        kept_first = not sparse_first and nnz / (n * f) <= 0.5 and len(group.cells) > 1
        kept = 1.0 - float(kw.get("dropout") or 0.0)
        width_in = f
        for layer in range(layers):
            last = layer == layers - 1
            out = k * out_heads if last else c
            h = out_heads if last else heads
            mats = 1
            if name == "gatv2" and kw.get("share_weights") is False:
                mats += 1
            if name == "gatv2" and kw.get("update_weight") == "separate":
                mats += 1
            grad_in = 0.0 if layer == 0 else 1.0
            for _m in range(mats):
                if layer == 0 and sparse_first:
                    w.dense(nnz, 1, out, item, fwd_passes + bwd / 2)
                elif layer == 0 and kept_first:
                    w.dense(kept * nnz, 1, out, item, 1.0 + bwd / 2)
                    w.dense(nnz, 1, out, item, fwd_passes - 1.0)
                else:
                    w.dense(n, width_in, out, item, fwd_passes + bwd / 2 * (1 + grad_in))
            params += mats * width_in * out
            passes = fwd_passes + bwd
            if name == "gcn":
                w.stream(passes * 2 * e * out, passes * (e * out + n * out + 2 * e), item)
            elif name == "gatv2":
                w.stream(passes * (6 * e * out + 5 * e * h), passes * (2 * e * out + 2 * n * out + 3 * e * h), item)
                params += out
            else:  # gat: per-node scores, then per edge and head
                w.dense(n, out, 2 * h, item, passes)
                w.stream(passes * (2 * e * out + 8 * e * h), passes * (e * out + n * out + 4 * e * h), item)
                params += 2 * out
            if dropout:
                w.stream(2 * n * width_in + 2 * e * h, 2 * n * width_in + 2 * e * h, item)
            w.stream(passes * 2 * n * out, passes * 2 * n * out, item)  # activation (and its gradient)
            width_in = out
    if not energy:
        adam = cfg["train"]["optimizer"] in ("adam", "adamw")
        w.stream((10 if adam else 2) * params, (7 if adam else 3) * params, item)
        w.stream(20 * n * k * fwd_passes, 4 * n * k * fwd_passes, item)  # loss, its gradient, the metrics
    w.notes.append(f"N={n:.0f} E={e:.0f} (self-loops incl.) F={f:.0f} nnz={nnz:.0f} L={layers} "
                   f"params/replica={params:.3g}")
    return w


# --------------------------------------------------------------------------- ceilings


def matmul_rate(group: Group, repeat: int = 20) -> Tuple[float, str]:
    """GFLOP/s of ``torch.bmm`` over ``R`` replicas at the hidden layer's size (N x C @ C x C)."""
    cfg = group.cells[0].config
    kw = cfg["model"]["kwargs"]
    dtype = getattr(torch, cfg["run"]["dtype"])
    n = int(group.task.data.x.size(0))
    c = int(kw.get("hidden_dim", 64))
    r = len(group.cells)
    a = torch.randn(r, n, c, dtype=dtype)
    b = torch.randn(r, c, c, dtype=dtype)
    out = torch.empty(r, n, c, dtype=dtype)
    torch.bmm(a, b, out=out)
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeat):
            torch.bmm(a, b, out=out)
        best = min(best, (time.process_time() - start) / repeat)
    return 2.0 * r * n * c * c / best / 1e9, f"bmm {r}x{n}x{c}x{c} {cfg['run']['dtype']}"


def copy_bandwidth(mib: int = 256, repeat: int = 5) -> float:
    """GB/s of a stream copy (read + write counted) of ``mib`` MiB."""
    src = torch.ones(mib * 2 ** 20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeat):
        start = time.process_time()
        dst.copy_(src)
        best = min(best, time.process_time() - start)
    return 2 * src.numel() * 4 / best / 1e9


# --------------------------------------------------------------------------- the profile

CLASSES = ("dense", "edge", "softmax", "elementwise", "optimiser", "python/dispatch")
DENSE_OPS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::matmul", "aten::linear",
             "aten::addmv", "aten::mv", "aten::dot", "aten::_addmm_activation"}
EDGE_WORDS = ("index_select", "index_add", "scatter", "gather", "sparse", "segment", "zoo_kernels", "zoo::",
              "embedding", "index_put", "_to_sparse", "to_sparse", "csr", "take")
SOFTMAX_WORDS = ("softmax", "logsumexp", "amax")
OPTIMISER_RANGE = "roofline::optimizer"
AUTOGRAD_NODE = "GeneratedBackwardFor_"


def classify(name: str) -> str:
    low = name.lower()
    if name in DENSE_OPS:
        return "dense"
    if any(word in low for word in SOFTMAX_WORDS):
        return "softmax"
    if any(word in low for word in EDGE_WORDS):
        return "edge"
    return "elementwise"


def counted(name: str) -> bool:
    """Whether a profiled event's self time is an op's (not a range, the engine, or Python).

    A custom op's autograd node, ``GeneratedBackwardFor_<ns>_<op>_<overload>``, counts: with a
    gradient recorded, the op's kernel runs inside that node's forward and has no record of its own
    (the node's self time is the kernel's; its ``...Backward`` twin calls the backward op, recorded)."""
    if name.startswith(("roofline::", "autograd::", "torch::autograd", "## ")) or "record_function" in name:
        return False
    return name.startswith(("aten::", AUTOGRAD_NODE)) or "::" in name


def op_class(ev: Any) -> str:
    """An op's class: the optimiser's range or an edge op (a zoo custom op, a sparse product) above it
    decides before the op's own name (a sparse product runs ``aten::addmm`` inside)."""
    parent = ev.cpu_parent
    inside_edge = False
    while parent is not None:
        if parent.name == OPTIMISER_RANGE:
            return "optimiser"
        if parent.name.startswith(("zoo::", "zoo_kernels::")) or "sparse" in parent.name:
            inside_edge = True
        parent = parent.cpu_parent
    return "edge" if inside_edge else classify(ev.name)


def in_optimiser_range(step: Any) -> Any:
    """``step`` (the optimiser's) inside the profiler range the classes read as the optimiser's,
    whatever arguments it takes (the deferred weight gradients were added after the first version)."""
    from torch.profiler import record_function

    def ranged(self: Any, *args: Any, **kwargs: Any) -> Any:
        with record_function(OPTIMISER_RANGE):
            return step(self, *args, **kwargs)

    return ranged


def profile_group(group: Group, epochs: int) -> Dict[str, float]:
    """Shares of the profiled CPU time by op class (``CLASSES``)."""
    from torch.profiler import ProfilerActivity, profile

    from zoo.trainer import optim

    original = optim.ReplicaOptimizer.step
    optim.ReplicaOptimizer.step = in_optimiser_range(original)  # type: ignore[method-assign]
    try:
        run(group, 1)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()  # the profiler's op times are wall times too
            run(group, epochs)
            total = time.perf_counter() - start
    finally:
        optim.ReplicaOptimizer.step = original  # type: ignore[method-assign]
    seconds = {c: 0.0 for c in CLASSES}
    for ev in prof.events():
        if ev.device_type.name != "CPU" or not counted(ev.name):
            continue
        seconds[op_class(ev)] += ev.self_cpu_time_total / 1e6
    seconds["python/dispatch"] = max(total - sum(seconds.values()), 0.0)
    top = sorted(((e.self_cpu_time_total, e.key, e.count) for e in prof.key_averages()), reverse=True)[:12]
    seconds["_top"] = top  # type: ignore[assignment]
    seconds["_total"] = total
    return seconds


# --------------------------------------------------------------------------- reports


def measure(key: str, epochs: int, profile: bool) -> Dict[str, Any]:
    group = load_group(SHAPES[key])
    per = time_group(group, epochs)
    work = count_work(group)
    rate, rate_what = matmul_rate(group)
    bw = copy_bandwidth()
    roof = work.dense_flops / (rate * 1e9) + work.other_bytes / (bw * 1e9)
    out = {"shape": key, "label": SHAPES[key].label, "replicas": len(group.cells), "cpu_ms": 1e3 * per,
           "gflops": work.flops / per / 1e9, "gbs": work.bytes / per / 1e9, "peak_gflops": rate,
           "peak_what": rate_what, "stream_gbs": bw, "roof_ms": 1e3 * roof, "fraction": roof / per,
           "work": {"dense_gflop": work.dense_flops / 1e9, "other_gflop": work.other_flops / 1e9,
                    "dense_mb": work.dense_bytes / 1e6, "other_mb": work.other_bytes / 1e6},
           "notes": work.notes}
    if profile:
        prof = profile_group(group, max(2, epochs // 2))
        total = prof.pop("_total")
        top = prof.pop("_top")
        out["profile"] = {c: v / total for c, v in prof.items()}
        out["profile_top"] = [(name, round(us / 1e3, 1), count) for us, name, count in top]
    return out


def print_report(rows: Sequence[Dict[str, Any]]) -> None:
    print(f"{'shape':58} {'R':>3} {'CPU ms/rep-ep':>13} {'GFLOP/s':>8} {'GB/s':>6} {'roof ms':>8} "
          f"{'fraction of roofline':>21}")
    for r in rows:
        print(f"{r['label']:58} {r['replicas']:>3} {r['cpu_ms']:>13.2f} {r['gflops']:>8.2f} {r['gbs']:>6.2f} "
              f"{r['roof_ms']:>8.2f} {r['fraction']:>21.3f}")
    for r in rows:
        print(f"\n{r['shape']}: {'; '.join(r['notes'])}; work per replica-epoch: dense {r['work']['dense_gflop']:.3f} "
              f"GFLOP / {r['work']['dense_mb']:.1f} MB, other {r['work']['other_gflop']:.3f} GFLOP / "
              f"{r['work']['other_mb']:.1f} MB; ceilings: {r['peak_what']} {r['peak_gflops']:.1f} GFLOP/s, "
              f"stream copy {r['stream_gbs']:.1f} GB/s")
        if "profile" in r:
            print("  profile (CPU self time): " + ", ".join(f"{c} {100 * v:.0f} %" for c, v in r["profile"].items()))
            print("  top ops (ms, calls): " + ", ".join(f"{n} {ms} ({c})" for n, ms, c in r["profile_top"]))


def tune_allocator() -> bool:
    """The tree's own allocator tuning: ``--time-only`` also runs under a reference tree from before
    ``zoo._allocator`` moved out of ``zoo.trainer``.  The old place is tried first: an editable
    install of another checkout can still serve ``zoo._allocator`` to that tree (a top-level module
    of its package), whose tuning the tree's trainer would then overwrite with its own."""
    try:
        from zoo.trainer.allocator import tune_allocator as tune  # type: ignore[import-not-found]
    except ImportError:
        from zoo._allocator import tune_allocator as tune
    return tune()


@dataclass(frozen=True)
class Spread:
    """One side's figures for a shape, one per fresh process (CPU ms per replica-epoch), and the
    system time's share of each."""

    values: Tuple[float, ...]
    sys_shares: Tuple[float, ...] = ()

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def text(self) -> str:
        """``min / median / max`` (one figure alone when there is one), then the median system share."""
        v = self.values
        core = f"{v[0]:.1f}" if len(v) == 1 else f"{min(v):.1f} / {self.median:.1f} / {max(v):.1f}"
        if self.sys_shares:
            core += f" (sys {round(100 * statistics.median(self.sys_shares))} %)"
        return core


def shape_line(label: str, new: Spread, ref: Spread) -> str:
    """A shape's line: each side's spread, the ratio of the medians new / ref and the per-pair ratios."""
    pairs = " ".join(f"{a / b:.3f}" for a, b in zip(new.values, ref.values))
    return (f"{label:58} new {new.text():>34}  ref {ref.text():>34}  new/ref {new.median / ref.median:.3f}"
            f" ({pairs})")


def summary_line(news: Sequence[Spread], refs: Sequence[Spread]) -> str:
    """The mean over shapes of each side's median, and ref / new of those means."""
    mean_new = statistics.mean(s.median for s in news)
    mean_ref = statistics.mean(s.median for s in refs)
    return (f"mean over shapes of the median CPU ms per replica-epoch: new {mean_new:.2f}, ref {mean_ref:.2f}, "
            f"ref / new = {mean_ref / mean_new:.2f}x")


def paired(keys: Sequence[str], ref: str, pairs: int, epochs: int) -> None:
    """Each shape timed in ``pairs`` fresh processes per side, alternating new / ref."""
    def one(tree: str, key: str) -> Tuple[float, float]:
        env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--time-only", "--shapes", key,
                              "--epochs", str(epochs)], env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"{key} under {tree} failed:\n{out.stderr[-3000:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        return float(row["cpu_ms"]), float(row.get("sys_ms", 0.0)) / float(row["cpu_ms"])

    new_tree = os.path.dirname(HERE)
    print(f"paired runs: new = {new_tree}, ref = {os.path.abspath(ref)}; CPU ms per replica-epoch, "
          f"{epochs} epochs after a warm-up, one thread, {pairs} fresh process(es) per side, alternating: "
          f"min / median / max (median system-time share); load {os.getloadavg()[0]:.2f}")
    news, refs = [], []
    for key in keys:
        sides: Dict[str, List[Tuple[float, float]]] = {"new": [], "ref": []}
        for _ in range(pairs):
            sides["new"].append(one(new_tree, key))
            sides["ref"].append(one(ref, key))
        new, old = (Spread(tuple(v for v, _ in sides[k]), tuple(s for _, s in sides[k])) for k in ("new", "ref"))
        news.append(new)
        refs.append(old)
        print(shape_line(SHAPES[key].label, new, old), flush=True)
    print(f"{summary_line(news, refs)}; load {os.getloadavg()[0]:.2f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    p.add_argument("--epochs", type=int, default=5, help="timed epochs per shape, after one warm-up epoch")
    p.add_argument("--profile", action="store_true", help="add the per-op-class breakdown")
    p.add_argument("--ref", default=None, help="another checkout of the zoo: paired timings new / ref")
    p.add_argument("--pairs", type=int, default=2,
                   help="with --ref: fresh processes per side and shape (their median is the figure; >= 3 to compare)")
    p.add_argument("--time-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = p.parse_args(argv)
    keys = [k.strip() for k in args.shapes.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SHAPES]
    if unknown:
        p.error(f"unknown shape(s) {', '.join(unknown)}; choose from {', '.join(SHAPES)}")
    torch.set_num_threads(1)
    os.environ.setdefault("ZOO_DATA_MIRROR", os.path.join(HERE, "..", "..", "shared", "datasets"))
    if args.ref:
        paired(keys, args.ref, args.pairs, args.epochs)
        return 0
    if args.time_only:
        tune_allocator()
        for key in keys:
            use = time_group_usage(load_group(SHAPES[key]), args.epochs)
            print(json.dumps({"shape": key, "cpu_ms": 1e3 * use["cpu"], "user_ms": 1e3 * use["user"],
                              "sys_ms": 1e3 * use["sys"], "minflt": use["minflt"]}))
        return 0
    tune_allocator()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, load {os.getloadavg()[0]:.2f}")
    rows = [measure(k, args.epochs, args.profile) for k in keys]
    print_report(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
