"""What a group of runs will cost, before running it: a calibrated linear model of its time (on the
CPU the CPU time its process uses, which a shared machine's load does not stretch; on a GPU the wall
time: :mod:`zoo.bench.plan.calibration`).

The work of one replica for one epoch is summarised by six counts read from the cell's
configuration and the dataset's size (a torch-free table, :data:`DATASET_TABLE`; no data is
loaded), and the time is a fitted linear combination of them::

    seconds per replica-epoch = a * dense_macs + b * edge_elements + c * dropout_elements
                                + d * layers x calls / replicas + e * segment_elements
                                + f * sparse_macs

* ``dense_macs``: multiply-adds of the node-wise dense linear maps (``N x in x out`` per weight);
* ``edge_elements``: elements of the per-edge tensors (``E' x width`` messages, ``E' x heads``
  scores, ``E' = E + N`` with self-loops) and of the node-wise element-wise work (activations,
  norms): memory-bound work whose cost is per element, not per multiply-add;
* ``dropout_elements``: dropout masks drawn (per replica, from its own random stream);
* ``layers x calls / replicas``: the per-layer dispatch overhead of the stacked (``vmap``) calls
  an epoch makes (forward, backward, evaluation; per mini-batch for graph lists), shared by the
  group's replicas;
* ``segment_elements``: elements a norm reduces per destination with torch's segment (scatter)
  ops outside the compiled kernels (:data:`NORM_SEGMENT_PER_HEAD`: LipschitzNorm's neighbourhood
  maximum, ``E' x heads`` per layer), whose cost per element is that of a scatter, not of a
  streamed element (fitted: ~130 of them; GAT-Lip's time grows with its heads);
* ``sparse_macs``: the first layer's ``nnz(X) x out`` multiply-adds where its bag-of-words input
  is multiplied as CSR (an input without dropout; a dropped one where the card's
  ``dropped_input_csr`` says stacked replicas multiply its stored entries), irregular reads whose
  cost per multiply-add is not a dense product's.

Each count is multiplied by the passes an epoch makes (forward + backward ~ 3 forwards, plus
an evaluation forward when dropout makes the training forward unusable for evaluation). A group
then takes ``epochs x replicas x per_replica_epoch`` (stopped replicas of a stacked group are
still computed, so ``epochs`` is the group's longest run, plus the evaluation of state 0).

A command also pays per process and once at its end, outside every group's ``group_wall_time_s`` and
``group_cpu_time_s`` (:mod:`zoo.bench.plan.estimate` adds them; measurements and commands:
docs/notes/quick_estimate.md):

* :attr:`CostModel.process_start_s`: a fresh Python process imports torch, PyG and the zoo's runner
  before its first group (the driver, and each worker a ``--workers N`` run spawns);
* :attr:`CostModel.process_exit_s`: the same process's exit — the interpreter's final garbage
  collection and module teardown walk every object those imports made (the driver waits for its
  workers' exits when the pool shuts down, then makes its own);
* :attr:`CostModel.report_s`: the leaderboard the command writes after the last group (reading the
  records, rendering markdown, CSV, JSON and HTML).

A suite without records of its own gets :attr:`CostModel.unseen_suite_factor` (see
:func:`zoo.bench.plan.calibration.fit`): the coefficients alone predict low.  A trained group is also
priced at its dataset's level (:attr:`CostModel.dataset_factors`, fitted on the groups whose CPU time was
measured): the counts price an element alike on every graph, which a graph's size against the caches
and its edges per node do not.  And at its shape's level (:attr:`CostModel.shape_factors`: one suite's groups of
one family, norm and depth on one graph, :func:`shape_key`), fitted on that shape's measured groups: what
the counts miss within a suite and a graph, such as subnormal numbers in a deep stack.  A long run (at least
:data:`LONG_RUN_EPOCHS` epochs) also pays its suite's and depth's long-run factor
(:attr:`CostModel.long_run_factors`, :func:`depth_key`): the measured long runs of that depth over its
probes, which see a run's first epochs only (a deep stack's parameters can turn subnormal late in training).

The coefficients are fitted (:func:`zoo.bench.plan.calibration.fit`, non-negative least squares on
the relative error) by ``zoo bench calibrate RECORDS... --out FILE`` from finished records, and ship
as ``cost_model.json`` (:mod:`zoo.bench.plan.cost_file`) with one entry per device kind (``cpu`` fitted on the project's 2-core
machine; ``cuda`` fitted on one NVIDIA H200's records with ``--no-suite-factors``, 5 groups of
Cornell and CiteSeer: their time is the per-layer dispatch and the dense products, so a large
graph's edge work — zero in that fit — is outside what it has seen).
"""
from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from zoo._names import normalize_name
from zoo.bench.suite.measures import mode_spec
from zoo.registry import catalogue

#: the mode factor fitted on the groups measured without training (the calibration labels them so,
#: records do not name their mode); another such mode without its own factor takes this one
MEASURED_FACTOR = "energy_at_init"


def measures_once(mode: str) -> bool:
    """Whether ``mode`` runs one forward pass per replica instead of the training protocol."""
    return not mode_spec(mode).trains

HERE = Path(__file__).resolve().parent
DATASET_TABLE = HERE / "dataset_sizes.json"
TERMS = ("dense_macs", "edge_elements", "dropout_elements", "layers_per_replica", "segment_elements", "sparse_macs")

#: first-layer inputs at most this dense are multiplied as CSR (zoo.ops.sparse_linear.SPARSE_MAX_DENSITY)
SPARSE_MAX_DENSITY = 0.05
#: dispatch cost of a stacked (vmap) call relative to a plain one (lipschitz_table1: R = 2 groups
#: took 2-3x the time of R = 1 groups of the same cells)
VMAP_OVERHEAD = 2.0
#: nonzero share of a bag-of-words input whose files were absent when the table was made
UNKNOWN_DENSITY = 0.01
#: seconds a fresh process spends importing torch, PyG and the zoo's runner before its first group;
#: a device entry's ``process_start_s`` replaces it (measured: docs/notes/quick_estimate.md)
PROCESS_START_S = 8.0
#: seconds the same process spends exiting (the interpreter's teardown of those imports' objects);
#: a device entry's ``process_exit_s`` replaces it
PROCESS_EXIT_S = 2.0
#: seconds the command spends on its leaderboard after the last group; a device entry's ``report_s``
#: replaces it
REPORT_S = 1.5
#: a graph whose size the table lacks (a suite file's own dataset): Cora-sized
DEFAULT_SIZE = {"nodes": 2708, "edges": 10556, "features": 1433, "density": 0.0127, "classes": 7, "graphs": 1,
                "train_share": 1.0, "kind": "transductive"}


class CostModelError(ValueError):
    """A cost-model file or calibration input that cannot be used."""


# --------------------------------------------------------------------------- dataset sizes


def _options_key(dataset: str, options: Mapping[str, Any]) -> str:
    return dataset if not options else f"{dataset} {json.dumps(dict(options), sort_keys=True)}"


def load_dataset_table(path: Path = DATASET_TABLE) -> Dict[str, Dict[str, Any]]:
    """``{key: sizes}``; a key is the dataset name, or ``name {options json}`` for generated data."""
    return json.loads(path.read_text())["datasets"]


def dataset_size(task: Mapping[str, Any], table: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """Sizes for a cell's ``task`` table: exact (name + options), else by name, else Cora-sized."""
    name = task["dataset"]
    options = task.get("options") or {}
    for key in (_options_key(name, options), name):
        if key in table:
            return {**DEFAULT_SIZE, **table[key]}
    return dict(DEFAULT_SIZE)


# --------------------------------------------------------------------------- features


#: a model card's ``cost`` table (``registry/*.toml``): what one layer computes, read from the layer's code —
#: weights reading the layer input, extra out x out weights, edge elements per output unit, edge elements
#: per head, tensor ops per layer relative to GAT's (the last sets the per-call dispatch overhead)
COST_KEYS = ("weights_in", "weights_square", "edge_per_unit", "edge_per_head", "ops")


@dataclass(frozen=True)
class LayerWork:
    """A family's per-layer work (its card's ``cost`` table): :data:`COST_KEYS`, the option values that
    add a weight matrix reading the input (``extra_weights_in``), an MLP encoder before the first block, and
    ``input_copies``: the first layer reads ``1 + hops * reducers`` copies of the input features (a
    fixed-aggregation table), each option's default given beside it on the card and overridden by the
    preset's or the cell's value (``reducers`` counts the names given); ``dropped_input_csr``: stacked
    replicas multiply a dropped bag-of-words input's stored entries (the layer's linear map alone reads it)."""

    weights_in: float
    weights_square: float
    edge_per_unit: float
    edge_per_head: float
    ops: float
    extra_weights_in: Mapping[str, Any] = field(default_factory=dict)
    mlp_encoder: bool = False
    input_copies: Mapping[str, Any] = field(default_factory=dict)
    dropped_input_csr: bool = False


@functools.lru_cache(maxsize=None)
def layer_work(model: str) -> LayerWork:
    """The per-layer work of ``model`` (a registered name, or a preset ``name.tag``) from its card; a
    model whose card has no ``cost`` table is refused (the model never guesses a family's work)."""
    name = normalize_name(model.split(".")[0])
    cost = catalogue().get(name, {}).get("cost")
    missing = [k for k in COST_KEYS if k not in (cost or {})]
    if missing:
        raise CostModelError(f"model {name!r} has no cost on its card ({', '.join(missing)} missing): add "
                             f"cost = {{ {', '.join(f'{k} = ...' for k in COST_KEYS)} }} to its table in registry/*.toml "
                             "(what one layer computes; zoo.bench.plan.cost)")
    return LayerWork(**{k: float(cost[k]) for k in COST_KEYS}, extra_weights_in=dict(cost.get("extra_weights_in", {})),
                     mlp_encoder=bool(cost.get("mlp_encoder", False)),
                     input_copies=dict(cost.get("input_copies", {})),
                     dropped_input_csr=bool(cost.get("dropped_input_csr", False)))


def _input_copies(work: LayerWork, model: str, kw: Mapping[str, Any]) -> float:
    """How many copies of the input features the first layer reads (1 without ``input_copies``)."""
    if not work.input_copies:
        return 1.0
    name, _, tag = model.partition(".")
    presets = catalogue().get(normalize_name(name), {}).get("presets", {})
    options = {**work.input_copies, **(presets.get(normalize_name(tag), {}) if tag else {}), **kw}
    reducers = options["reducers"]  # one name, or a list of names
    return 1.0 + positive_int(options["hops"], 1) * (1 if isinstance(reducers, str) else len(reducers))


#: node-wise element-wise work per output unit (activation, residual, bias) and per norm
NORM_ELEMENTS = {"none": 0, "layernorm": 4, "pairnorm": 4, "batchnorm": 4, "lipschitz": 6}
#: a norm's segment reductions per edge and head of an attention layer: LipschitzNorm's neighbourhood maximum
#: of the sources' squared norms over each destination's in-edges (``scatter_reduce`` amax, and its backward),
#: torch ops outside the compiled kernels whose cost per element is unlike a streamed element's
NORM_SEGMENT_PER_HEAD = {"lipschitz": 1}


@dataclass(frozen=True)
class Features:
    """Work of one replica for one epoch (:data:`TERMS`)."""

    dense_macs: float
    edge_elements: float
    dropout_elements: float
    layers_per_replica: float
    segment_elements: float = 0.0
    sparse_macs: float = 0.0

    def vector(self) -> List[float]:
        return [self.dense_macs, self.edge_elements, self.dropout_elements, self.layers_per_replica,
                self.segment_elements, self.sparse_macs]


def positive_int(value: Any, default: int) -> int:
    """``value`` as a positive integer count, or ``default`` where it is not one."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def features(config: Mapping[str, Any], replicas: int, table: Mapping[str, Mapping[str, Any]],
             mode: str = "train") -> Features:
    """The :class:`Features` of one replica-epoch of ``config`` (a resolved suite cell) trained
    in a group of ``replicas``; a mode that does not train (``energy_at_init``) counts one forward pass."""
    model = config["model"]
    kw = model.get("kwargs") or {}
    size = dataset_size(config["task"], table)
    if size.get("density") is None:  # files absent where the table was made: a bag-of-words guess
        size["density"] = UNKNOWN_DENSITY
    n, e, f = float(size["nodes"]), float(size["edges"]), float(size["features"])
    e_loops = e + n
    work = layer_work(str(model.get("name", "")))
    copies = _input_copies(work, str(model.get("name", "")), kw)
    if copies > 1:  # aggregated copies of sparse features are dense
        f, size["density"] = f * copies, 1.0
    w_in, w_sq, per_unit, per_head, ops = (work.weights_in, work.weights_square, work.edge_per_unit,
                                           work.edge_per_head, work.ops)
    layers = positive_int(kw.get("num_layers"), 2)
    hidden = positive_int(kw.get("hidden_dim"), 64)
    heads = positive_int(kw.get("heads"), 1) if per_head else 1
    classes = positive_int(size.get("classes"), 2)
    out_heads = positive_int(kw.get("out_heads"), heads) if per_head else 1
    averaged = kw.get("hidden_heads") == "mean"  # each hidden head is hidden_dim wide, then averaged
    dropout = _float(kw.get("dropout"))
    attn_dropout = _float(kw.get("attn_dropout"))
    input_dropout = _float(kw.get("input_dropout"))
    norm = NORM_ELEMENTS.get(str(model.get("norm") or "none"), 4)
    w_in += sum(1 for key, value in work.extra_weights_in.items() if key in kw and kw[key] == value)
    classifier = kw.get("classifier", "none") not in (None, "none")
    encoder = kw.get("input_encoder")
    graph_level = size.get("kind") == "graph"

    dense = edge = drop = segment = sparse = 0.0
    width_in = f
    # a dropped-out input is a new dense tensor every epoch (no CSR product then), but where the card says
    # the layer's linear map alone reads it (GAT, GATv2, no residual) stacked replicas multiply it as CSR
    csr_dropped = work.dropped_input_csr and replicas > 1 and kw.get("residual", "none") in ("none", None)
    sparse_first = size["density"] <= SPARSE_MAX_DENSITY and not (
        encoder or input_dropout or (dropout and not csr_dropped))
    if encoder in ("affine", "linear", "mlp"):
        enc = positive_int(kw.get("input_encoder_dim"), hidden)
        dense += n * f * enc * size.get("density", 1.0) if size.get("density", 1.0) <= SPARSE_MAX_DENSITY else n * f * enc
        width_in = enc
    elif encoder:  # embedding look-ups (OGB atom / bond encoders)
        width_in = hidden
        edge += n * hidden
    if work.mlp_encoder:  # an MLP encoder to hidden_dim, always
        dense += n * f * hidden * (size["density"] if size.get("density", 1.0) <= SPARSE_MAX_DENSITY else 1.0)
        dense += n * hidden * hidden
        width_in = hidden
        sparse_first = False
    if input_dropout:
        drop += n * f
    for layer in range(layers):
        last = layer == layers - 1 and not classifier and not graph_level
        out = classes * out_heads if last else hidden * (heads if averaged else 1)
        h = out_heads if last else heads
        share = size.get("density", 1.0) if layer == 0 and sparse_first else 1.0  # the input's stored entries
        if share < 1.0:  # a CSR product: its multiply-adds cost unlike a dense product's
            sparse += n * w_in * width_in * share * out
            dense += n * w_sq * out * out
        else:
            dense += n * (w_in * width_in * out + w_sq * out * out)
        edge += e_loops * (per_unit * out + per_head * h) + n * out * (2 + norm)
        segment += e_loops * h * NORM_SEGMENT_PER_HEAD.get(str(model.get("norm") or "none"), 0) if per_head else 0.0
        if dropout:  # masks are drawn on a CSR input's stored entries
            drop += n * width_in * share
        if attn_dropout and per_head:
            drop += e_loops * h
        width_in = hidden if averaged and not last else out
    if classifier:
        dense += n * hidden * classes
    if graph_level:  # readout: pooling and a 2-layer MLP on the pooled vectors
        g = float(size.get("graphs", 1))
        dense += g * 2 * hidden * hidden
        edge += n * hidden
    deterministic = not (dropout or attn_dropout or input_dropout)
    passes, calls = _passes_and_calls(config, size, mode, deterministic)
    # one replica is a plain call; several are one vmap call, whose per-op dispatch costs more
    overhead = layers * calls * ops * (1.0 if replicas == 1 else VMAP_OVERHEAD)
    return Features(dense * passes, edge * passes, drop * (1.0 if measures_once(mode) else 2.0),
                    overhead / max(replicas, 1), segment * passes, sparse * passes)



def _passes_and_calls(config: Mapping[str, Any], size: Mapping[str, Any], mode: str,
                      deterministic: bool) -> Tuple[float, float]:
    """Passes over the graph per replica-epoch (a backward counts twice) and op calls per layer."""
    if measures_once(mode):
        return 1.0, 1.0
    if size.get("kind") in ("graph", "inductive"):
        # one training pass (forward + backward) over the training graphs, one evaluation of all;
        # every mini-batch is a call (a stacked forward's per-layer dispatch), backward counts twice
        share = float(size.get("train_share", 1.0))
        graphs = float(size.get("graphs", 1))
        batch = positive_int((config.get("train") or {}).get("batch_size"), 0) or graphs
        return 3.0 * share + 1.0, 2.0 * math.ceil(graphs * share / batch) + math.ceil(graphs / batch) + 2.0
    return (3.0, 2.0) if deterministic else (4.0, 3.0)

# --------------------------------------------------------------------------- the model


#: a group trained at least this many epochs is a long run: its suite's stacks of its depth may cost more per epoch
#: late in training than in their first epochs (:attr:`CostModel.long_run_factors`), which a probe of a few epochs
#: does not see
LONG_RUN_EPOCHS = 1000


def depth_key(config: Mapping[str, Any], suite: Optional[str]) -> str:
    """``suite|layers``: the stacks of one depth in one suite (every graph and family), which
    :attr:`CostModel.long_run_factors` prices alike."""
    return f"{suite}|{positive_int((config['model'].get('kwargs') or {}).get('num_layers'), 2)}"


def shape_key(config: Mapping[str, Any], suite: Optional[str]) -> str:
    """``suite|dataset|layers|family|norm``: the groups of one suite that run the same layers on the same
    graph (seeds, inits, heads and other options apart), which :attr:`CostModel.shape_factors` prices alike."""
    model = config["model"]
    layers = positive_int((model.get("kwargs") or {}).get("num_layers"), 2)
    family = normalize_name(str(model.get("name", "")).split(".")[0])
    return f"{suite}|{config['task']['dataset']}|{layers}|{family}|{model.get('norm') or 'none'}"


@dataclass
class CostModel:
    """Fitted coefficients (seconds per unit of each of :data:`TERMS`) and per-suite factors."""

    coefficients: Dict[str, float]
    suite_factors: Dict[str, float]
    device: str = "cpu"
    fitted_on: str = ""
    #: actual / modelled time of groups that do not train (energy at initialisation: building L-layer
    #: replicas and the per-layer energy trace in float64 dominate its one forward pass)
    mode_factors: Dict[str, float] = field(default_factory=dict)
    #: a fresh process's imports before its first group (the driver's, each spawned worker's)
    process_start_s: float = PROCESS_START_S
    #: a process's exit after its last group (the driver's, each spawned worker's)
    process_exit_s: float = PROCESS_EXIT_S
    #: the leaderboard written once at the end of a command
    report_s: float = REPORT_S
    #: the factor of a suite with no records in the fit (:func:`zoo.bench.plan.calibration.fit`)
    unseen_suite_factor: float = 1.0
    #: a dataset's level beside its suite's, from the groups with a measured CPU time that trained on it
    #: (:func:`zoo.bench.plan.calibration.fit`); 1 for a dataset without such groups
    dataset_factors: Dict[str, float] = field(default_factory=dict)
    #: a shape's level beside its suite's and its dataset's (:func:`shape_key`: suite, dataset, depth, family,
    #: norm), from the measured groups of that shape (:func:`zoo.bench.plan.calibration.fit`); 1 for a shape
    #: without such groups
    shape_factors: Dict[str, float] = field(default_factory=dict)
    #: a long run's time per epoch over its first epochs' (:data:`LONG_RUN_EPOCHS`), per :func:`depth_key`, from the
    #: measured long runs of that suite and depth against its measured short ones
    #: (:func:`zoo.bench.plan.calibration.fit`); see :meth:`long_run_factor`
    long_run_factors: Dict[str, float] = field(default_factory=dict)

    def long_run_factor(self, config: Mapping[str, Any], suite: Optional[str], epochs: float) -> float:
        """What a run of ``epochs`` epochs pays per epoch over its first epochs' rate: 1 for a short run
        (fewer than :data:`LONG_RUN_EPOCHS`), else its depth's factor in its suite, or where that depth has
        none, the deepest shallower one's of the same suite (a stack's parameters turn subnormal late in
        training, an x86 core takes a microcode assist per subnormal operand, and deeper stacks hold more of
        them); 1 without one."""
        if not suite or epochs < LONG_RUN_EPOCHS or not self.long_run_factors:
            return 1.0
        layers = positive_int((config["model"].get("kwargs") or {}).get("num_layers"), 2)
        depths = [int(k.rsplit("|", 1)[1]) for k in self.long_run_factors if k.rsplit("|", 1)[0] == suite]
        shallower = [d for d in depths if d <= layers]
        return self.long_run_factors[f"{suite}|{max(shallower)}"] if shallower else 1.0

    def replica_epoch_seconds(self, config: Mapping[str, Any], replicas: int,
                              table: Mapping[str, Mapping[str, Any]], mode: str = "train",
                              suite: Optional[str] = None) -> float:
        x = features(config, replicas, table, mode)
        base = sum(self.coefficients.get(t, 0.0) * v for t, v in zip(TERMS, x.vector()))
        if measures_once(mode):
            return base * self.mode_factors.get(mode, self.mode_factors.get(MEASURED_FACTOR, 1.0))
        # a mode that trains (train_attention, prune_layers) is fitted as "train" (records do not
        # name their mode), so it takes its suite's level as the fit set it
        level = self.suite_factors.get(suite, self.unseen_suite_factor) if suite else 1.0
        shape = self.shape_factors.get(shape_key(config, suite), 1.0) if suite else 1.0
        return base * level * shape * self.dataset_factors.get(str(config["task"]["dataset"]), 1.0)

    def group_seconds(self, configs: Sequence[Mapping[str, Any]], epochs: float,
                      table: Mapping[str, Mapping[str, Any]], mode: str = "train",
                      suite: Optional[str] = None) -> float:
        """A group of ``len(configs)`` stacked replicas run for ``epochs`` epochs (0 for
        energy-at-init, counted as one forward)."""
        r = len(configs)
        if measures_once(mode):
            return r * self.replica_epoch_seconds(configs[0], r, table, mode, suite)
        late = self.long_run_factor(configs[0], suite, epochs)
        return (float(epochs) + 1.0) * r * late * self.replica_epoch_seconds(configs[0], r, table, mode, suite)


@functools.lru_cache(maxsize=1)
def shipped_table() -> Dict[str, Dict[str, Any]]:
    """:func:`load_dataset_table` of the shipped table, read once."""
    return load_dataset_table()


def expected_epochs(cap: int, finished: Sequence[int]) -> float:
    """A group's expected epochs: the median of finished groups of the same slice when the suite
    stops early (patience / loss threshold), else the cap."""
    return float(statistics.median(finished)) if finished else float(cap)


__all__ = ["Features", "features", "layer_work", "LayerWork", "COST_KEYS", "CostModel", "shape_key", "depth_key", "LONG_RUN_EPOCHS", "shipped_table", "load_dataset_table", "dataset_size", "expected_epochs",
           "CostModelError", "TERMS", "PROCESS_START_S", "PROCESS_EXIT_S", "REPORT_S"]
